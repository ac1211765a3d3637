// `html` tagged templates (htm) rendering Preact elements: JSX without a
// compile step. Every view imports its hooks and `html` from here.

import { h } from 'preact';
import htm from 'htm';

export { h, render } from 'preact';
export { useCallback, useEffect, useMemo, useRef, useState } from 'preact/hooks';

/** `html\`<div class=${c}>…</div>\``. */
export const html = htm.bind(h);
