// The pipelines page: every pipeline with its state, parallelism, rates,
// watermark lag and last checkpoint's age (on a cluster: how many units
// run on how many workers), polled every second while the tab is visible;
// and the Deploy dialog (a YAML spec, POST /v1/pipelines).

import { formatAge, formatDuration, formatPlacement, formatRate } from '../format.js';
import { usePoll } from '../hooks.js';
import { html, useRef, useState } from '../html.js';
import { headline, placement } from '../model.js';
import { pipelineHref } from '../router.js';
import { Dialog, ErrorLine, StateBadge } from './common.js';

const EXAMPLE = `name: orders
parallelism: 2
source: { type: generator, count: 100000000, keys: 1000 }
key: { function: revenue }
process: { function: revenue }
sink: { type: discard }
checkpoint: { interval: 2s }
watermark: { max_out_of_orderness: 5s }
`;

export function Pipelines({ api }) {
  const [list, setList] = useState(null);
  const [error, setError] = useState(null);
  const [deploying, setDeploying] = useState(false);
  const [notice, setNotice] = useState(null);
  const previous = useRef(new Map());

  usePoll(
    async () => {
      try {
        const answer = await api.get('/v1/pipelines');
        const now = Date.now();
        const rows = (answer?.pipelines ?? []).map((status) => {
          const numbers = headline(status, previous.current.get(status.name), now);
          return { status, numbers };
        });
        previous.current = new Map(rows.map((r) => [r.status.name, r.numbers]));
        setList(rows);
        setError(null);
      } catch (e) {
        setError(e);
      }
    },
    1000,
    [],
  );

  const now = Date.now();
  return html`<section>
    <div class="title-row">
      <h1>Pipelines</h1>
      <span class="spacer"></span>
      <button type="button" class="primary" onClick=${() => setDeploying(true)}>Deploy</button>
    </div>
    ${notice && html`<p class="notice" role="status">${notice}</p>`}
    <${ErrorLine} error=${error} />
    ${list === null
      ? html`<p class="muted">Loading…</p>`
      : list.length === 0
        ? html`<p class="muted">No pipelines yet: upload a function on the <a href="#/functions">Functions</a> page, then Deploy a spec that names it.</p>`
        : html`<table class="grid" aria-label="Pipelines">
            <thead><tr>
              <th>Name</th><th>State</th><th class="num">Parallelism</th><th class="num">In</th>
              <th class="num">Out</th><th class="num">Watermark lag</th><th>Last checkpoint</th>
            </tr></thead>
            <tbody>
              ${list.map(
                ({ status, numbers }) => html`<tr data-pipeline=${status.name}>
                  <td><a href=${pipelineHref(status.name)}>${status.name}</a>
                    ${status.failure && html`<div class="error small">${status.failure}</div>`}
                    ${status.restart?.next_attempt_at &&
                    html`<div class="muted small">restarting (${status.restart.restarts} so far)</div>`}
                    ${placement(status) &&
                    html`<div class="muted small" data-field="placement">${formatPlacement(placement(status))}</div>`}</td>
                  <td><${StateBadge} state=${status.state} /></td>
                  <td class="num">${status.parallelism}</td>
                  <td class="num" data-field="in-rate">${formatRate(numbers.inRate)}</td>
                  <td class="num" data-field="out-rate">${formatRate(numbers.outRate)}</td>
                  <td class="num">${formatDuration(numbers.lagMs)}</td>
                  <td>${status.last_checkpoint
                    ? html`<span title=${status.last_checkpoint.location}>${status.last_checkpoint.kind}
                        ${' '}${status.last_checkpoint.id}, ${formatAge(now, status.last_checkpoint.completed_at)}</span>`
                    : '—'}</td>
                </tr>`,
              )}
            </tbody>
          </table>`}
    <${DeployDialog} api=${api} open=${deploying} onClose=${() => setDeploying(false)}
      onDeployed=${(status) => setNotice(`Deployed ${status?.name ?? 'the pipeline'}.`)} />
  </section>`;
}

/** A text area for a spec, posted as YAML; the server's error is shown. */
function DeployDialog({ api, open, onClose, onDeployed }) {
  const [spec, setSpec] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState(null);
  const submit = async (event) => {
    event.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const status = await api.post('/v1/pipelines', spec, { type: 'application/yaml' });
      setSpec('');
      onClose();
      onDeployed(status);
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  return html`<${Dialog} open=${open} title="Deploy a pipeline" wide onClose=${() => !busy && onClose()}>
    <form onSubmit=${submit}>
      <label>Spec (YAML or JSON; functions named by <code>function:</code> are the uploaded ones)
        <textarea name="spec" rows="14" spellcheck="false" placeholder=${EXAMPLE} value=${spec}
          onInput=${(e) => setSpec(e.currentTarget.value)}></textarea>
      </label>
      <${ErrorLine} error=${error} />
      <div class="buttons">
        <button type="submit" class="primary" disabled=${busy || spec.trim() === ''}>Deploy</button>
        <button type="button" disabled=${busy} onClick=${onClose}>Cancel</button>
      </div>
    </form>
  <//>`;
}
