// The state lookup: one key's value in one state of a keyed operator, as
// the subtask that owns the key last saw it (GET …/state). The server
// decodes the stored bytes as asked (`decode`), by default as the type
// the function declares for the state (Rust's `declare_states!`), else
// JSON for Python and TypeScript functions and hex for Rust ones; hex is
// shown with its readings (text, a postcard varint).

import { describeBytes, fromBase64, fromHex } from '../format.js';
import { html, useState } from '../html.js';
import { pipelinePath, query } from '../router.js';
import { ErrorLine } from './common.js';

const DECODINGS = [
  ['', 'as stored (server default)'],
  ['declared', 'declared type (Rust)'],
  ['i64', 'i64 (Rust integer)'],
  ['u64', 'u64 (Rust unsigned)'],
  ['json', 'JSON'],
  ['string', 'text'],
  ['bytes', 'hex bytes'],
];

export function StateLookup({ api, name, operators }) {
  const [operator, setOperator] = useState(operators[0] ?? 'process');
  const [state, setState] = useState('');
  const [key, setKey] = useState('');
  const [decode, setDecode] = useState('');
  const [answer, setAnswer] = useState(null);
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const submit = async (event) => {
    event.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const params = { operator: operator || null, state, key, decode: decode || null };
      setAnswer(await api.get(pipelinePath(name, '/state') + query(params)));
    } catch (e) {
      setAnswer(null);
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  const listId = `operators-${name}`;
  return html`<form class="lookup" onSubmit=${submit} aria-label="State lookup">
    <label>Operator
      <input name="operator" list=${listId} value=${operator} onInput=${(e) => setOperator(e.currentTarget.value)} />
      <datalist id=${listId}>${operators.map((o) => html`<option value=${o} />`)}</datalist>
    </label>
    <label>State <input name="state" value=${state} placeholder="total" required onInput=${(e) => setState(e.currentTarget.value)} /></label>
    <label>Key <input name="key" value=${key} placeholder="42" onInput=${(e) => setKey(e.currentTarget.value)} /></label>
    <label>Decode
      <select name="decode" value=${decode} onChange=${(e) => setDecode(e.currentTarget.value)}>
        ${DECODINGS.map(([value, label]) => html`<option value=${value}>${label}</option>`)}
      </select>
    </label>
    <button type="submit" class="primary" disabled=${busy}>Look up</button>
  </form>
  <${ErrorLine} error=${error} />
  ${answer && html`<${StateValue} answer=${answer} />`}`;
}

/** The readings of raw bytes: hex, text, varint. */
function Bytes({ bytes }) {
  const b = describeBytes(bytes);
  return html`<dl class="value" data-encoding="bytes">
    <dt>hex (${b.length} bytes)</dt><dd class="mono">${b.hex || '(empty)'}</dd>
    ${b.text !== null && html`<dt>as text</dt><dd class="mono">${b.text}</dd>`}
    ${b.varint &&
    html`<dt>as a varint</dt><dd class="mono" data-field="varint">${b.varint.unsigned} unsigned · <span data-field="signed">${b.varint.signed}</span> signed (zigzag: how the Rust SDK stores an i64)</dd>`}
  </dl>`;
}

/** One decoded value: JSON, or hex bytes with their readings. */
function Decoded({ value, encoding }) {
  const hex = encoding === 'bytes' ? fromHex(value) : null;
  if (hex) return html`<${Bytes} bytes=${hex} />`;
  const undecodable = value && typeof value === 'object' && typeof value.undecodable === 'string' ? fromHex(value.undecodable) : null;
  if (undecodable) {
    return html`<div><p class="error small">Not ${encoding}; the stored bytes:</p><${Bytes} bytes=${undecodable} /></div>`;
  }
  return html`<pre class="value" data-encoding=${encoding ?? 'json'} data-field="value">${JSON.stringify(value, null, 2)}</pre>`;
}

/** The answer: the value (or a map's entries), where it came from. */
export function StateValue({ answer }) {
  const where = html`<code>${answer.state}</code> of <code>${answer.operator}</code> for key <code>${answer.key}</code>`;
  let body;
  if (!answer.found) {
    body = html`<p>No value in ${where}.</p>`;
  } else if (typeof answer.bytes_base64 === 'string') {
    body = html`<p>${where}:</p><${Bytes} bytes=${fromBase64(answer.bytes_base64)} />`;
  } else if (Array.isArray(answer.entries)) {
    body = html`<p>${where}: a map of ${answer.entries.length} entries${answer.entries.length >= 1000 ? ' (the first 1000)' : ''}</p>
      <table class="grid" aria-label="Map entries"><thead><tr><th>Key</th><th>Value</th></tr></thead>
        <tbody>${answer.entries.map(
          ([k, v]) => html`<tr><td><${Decoded} value=${k} encoding=${answer.encoding} /></td><td><${Decoded} value=${v} encoding=${answer.encoding} /></td></tr>`,
        )}</tbody></table>`;
  } else {
    const kind = answer.kind && answer.kind !== 'value' ? ` (a ${answer.kind} state)` : '';
    body = html`<p>${where}${kind}, shown as ${answer.encoding ?? 'JSON'}:</p><${Decoded} value=${answer.value} encoding=${answer.encoding} />`;
  }
  return html`<div class="state-answer" role="status">
    ${body}
    ${answer.as_of &&
    html`<p class="muted small">As of ${answer.as_of}${typeof answer.subtask === 'number' ? ` (subtask ${answer.subtask})` : ''}.</p>`}
    ${answer.unit &&
    html`<p class="muted small" data-field="owner">From unit <code>${answer.unit}</code> on worker <code>${answer.worker ?? '—'}</code>, which owns the key.</p>`}
  </div>`;
}
