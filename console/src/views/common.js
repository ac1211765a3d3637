// Small pieces the pages share: the modal dialog, error and notice lines,
// the state badge, a button that runs an async action.

import { html, useEffect, useRef, useState } from '../html.js';

let dialogs = 0;

/**
 * A modal `<dialog>` (not `window.confirm`, so it can be styled and a
 * browser test can click it). Shown while `open`; `onClose` when the user
 * dismisses it (Escape or a button that calls it).
 */
export function Dialog({ open, title, onClose, children, wide = false }) {
  const ref = useRef(null);
  const id = useRef(`dialog-title-${++dialogs}`);
  useEffect(() => {
    const dialog = ref.current;
    if (!dialog) return;
    if (open && !dialog.open) dialog.showModal();
    if (!open && dialog.open) dialog.close();
  }, [open]);
  const cancel = (event) => {
    event.preventDefault();
    onClose?.();
  };
  return html`<dialog ref=${ref} class=${wide ? 'wide' : ''} aria-labelledby=${id.current} onCancel=${cancel}>
    ${open &&
    html`<h2 id=${id.current}>${title}</h2>
      ${children}`}
  </dialog>`;
}

/**
 * A dialog that confirms one action: `message`, then buttons for each of
 * `choices` (`{ label, run, danger }`) and Cancel. The buttons are disabled
 * while `run` works; its error is shown; on success it closes.
 */
export function Confirm({ open, title, message, choices, onClose, onDone, children }) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState(null);
  useEffect(() => {
    if (open) setError(null);
  }, [open]);
  const choose = async (choice) => {
    setBusy(true);
    setError(null);
    try {
      const result = await choice.run();
      onClose();
      onDone?.(result, choice);
    } catch (e) {
      setError(e.message ?? String(e));
    } finally {
      setBusy(false);
    }
  };
  return html`<${Dialog} open=${open} title=${title} onClose=${() => !busy && onClose()}>
    ${message && html`<p>${message}</p>`} ${children}
    <${ErrorLine} error=${error} />
    <div class="buttons">
      ${choices.map(
        (choice) =>
          html`<button type="button" class=${choice.danger ? 'danger' : 'primary'} disabled=${busy}
            onClick=${() => choose(choice)}>${choice.label}</button>`,
      )}
      <button type="button" disabled=${busy} onClick=${onClose}>Cancel</button>
    </div>
    ${busy && html`<p class="muted">Working…</p>`}
  <//>`;
}

/** An error message, or nothing. */
export function ErrorLine({ error }) {
  if (!error) return null;
  return html`<p class="error" role="alert">${typeof error === 'string' ? error : error.message}</p>`;
}

/** A pipeline's state as a coloured badge. */
export function StateBadge({ state }) {
  return html`<span class=${`badge state-${state ?? 'unknown'}`}>${state ?? '—'}</span>`;
}

/** A link-styled "copy" of long text shown short (digests, locations). */
export function Short({ text, keep = 12 }) {
  if (!text) return '—';
  return html`<span class="mono" title=${text}>${text.length > keep ? `${text.slice(0, keep)}…` : text}</span>`;
}
