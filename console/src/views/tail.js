// The live tail of one output (a sink or a side output): a sample of what
// it is written, the last 100 records kept, read from GET …/tail as
// server-sent events over `fetch` (so the token goes in a header), until
// Stop or the server ends it (it sends a limited number, rate-limited).

import { formatTime } from '../format.js';
import { html, useEffect, useRef, useState } from '../html.js';
import { pipelinePath, query } from '../router.js';
import { keepLast, readEvents } from '../sse.js';
import { ErrorLine } from './common.js';

const LIMIT = 100;

/** A tail event's data as a line: `{ timestamp, key, value }`. */
export function lineOf(data) {
  try {
    const event = JSON.parse(data);
    return { timestamp: event.timestamp ?? null, key: event.key ?? null, value: String(event.value ?? '') };
  } catch {
    return { timestamp: null, key: null, value: data };
  }
}

export function Tail({ api, name, outputs }) {
  const [chosen, setOutput] = useState(null);
  const [lines, setLines] = useState([]);
  const [phase, setPhase] = useState('idle'); // idle | streaming | ended | stopped
  const [error, setError] = useState(null);
  const controller = useRef(null);
  const box = useRef(null);
  const pinned = useRef(true);
  useEffect(() => () => controller.current?.abort(), []);
  // Follow new lines, as `tail -f` does, unless the reader scrolled up.
  useEffect(() => {
    if (box.current && pinned.current) box.current.scrollTop = box.current.scrollHeight;
  }, [lines]);
  const onScroll = () => {
    const b = box.current;
    pinned.current = b.scrollHeight - b.scrollTop - b.clientHeight < 24;
  };

  const choices = outputs.length > 0 ? outputs : ['main'];
  const output = chosen ?? choices[0];
  const start = async () => {
    controller.current?.abort();
    const abort = new AbortController();
    controller.current = abort;
    setLines([]);
    setError(null);
    setPhase('streaming');
    let pending = [];
    let flush = null;
    const onEvent = (event) => {
      pending.push(lineOf(event.data));
      // Render at most ten times a second however fast records come.
      flush ??= setTimeout(() => {
        const more = pending;
        pending = [];
        flush = null;
        setLines((old) => keepLast(old, more, LIMIT));
      }, 100);
    };
    try {
      const response = await api.request(
        'GET',
        pipelinePath(name, '/tail') + query({ output }),
        { raw: true, signal: abort.signal },
      );
      await readEvents(response, onEvent, abort.signal);
      if (controller.current === abort) setPhase('ended');
    } catch (e) {
      if (e?.name === 'AbortError') {
        if (controller.current === abort) setPhase('stopped');
      } else {
        setError(e);
        setPhase('idle');
      }
    } finally {
      clearTimeout(flush);
      if (pending.length > 0) setLines((old) => keepLast(old, pending, LIMIT));
    }
  };
  const stop = () => controller.current?.abort();
  return html`<div class="tail">
    <div class="row">
      <label>Output
        <select name="output" value=${output} disabled=${phase === 'streaming'} onChange=${(e) => setOutput(e.currentTarget.value)}>
          ${choices.map((o) => html`<option value=${o}>${o}</option>`)}
        </select>
      </label>
      ${phase === 'streaming'
        ? html`<button type="button" class="danger" onClick=${stop}>Stop tail</button>`
        : html`<button type="button" class="primary" onClick=${start}>Tail</button>`}
      <span class="muted small" role="status">${{ idle: '', streaming: 'streaming…', ended: 'the server ended the stream', stopped: 'stopped' }[phase]}</span>
    </div>
    <${ErrorLine} error=${error} />
    ${lines.length > 0 &&
    html`<div class="tail-lines mono" aria-label="Tail lines" ref=${box} onScroll=${onScroll}>
      ${lines.map(
        (l) => html`<div class="tail-line"><span class="muted">${l.timestamp === null ? '' : formatTime(l.timestamp)}</span>
          ${l.key !== null && html` <span class="tail-key">${l.key}</span>`} <span class="tail-value">${l.value}</span></div>`,
      )}
    </div>`}
  </div>`;
}
