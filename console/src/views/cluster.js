// A cluster pipeline's units (`weir serve --cluster`): one box per worker
// listing the units it runs, each coloured by its state (green running,
// orange starting, waiting or stopping, red failed) with its records,
// rates, lag and last checkpoint; the workers waiting to run it, and why;
// and a table of every unit as the workers last reported it.

import { compact, formatBytes, formatCount, formatRate, formatTime } from '../format.js';
import { html } from '../html.js';

const ROLES = { ingest: 'ingest (reads the input)', task: 'task (keyed stages, outputs)' };

/** A checkpoint id, or a dash. */
const checkpoint = (id) => (typeof id === 'number' ? `#${id}` : '—');

/** The workers, each a box of its units (`cluster` from `workersOf`). */
export function Workers({ cluster }) {
  if (!cluster || cluster.workers.length === 0) {
    return html`<p class="muted">No worker reports a unit of it yet.</p>`;
  }
  return html`<div class="workers" aria-label="Workers">
    ${cluster.workers.map(
      (w) => html`<section class="worker" data-worker=${w.worker} aria-label=${`Worker ${w.worker}`}>
        <h3>${w.worker} <span class="muted small">${w.units.length} unit${w.units.length === 1 ? '' : 's'}</span></h3>
        ${w.waiting && html`<p class="notice small" data-field="waiting">Waiting: ${w.waiting}</p>`}
        ${w.units.map(
          (u) => html`<div class=${`unit unit-${u.state}`} data-unit=${u.unit} data-state=${u.state} title=${ROLES[u.role] ?? u.role}>
            <div class="unit-head"><span class="unit-name">${u.unit}</span><span class="unit-state">${u.state}</span></div>
            <div class="unit-numbers small">
              <span>in <b data-field="records-in">${compact(u.records_in)}</b> (${formatRate(u.inRate)})</span>
              <span>out <b data-field="records-out">${compact(u.records_out)}</b> (${formatRate(u.outRate)})</span>
              <span>lag ${compact(u.lag)}</span>
              <span>checkpoint ${checkpoint(u.last_checkpoint)}</span>
            </div>
            ${u.error && html`<div class="error small">${u.error}</div>`}
          </div>`,
        )}
      </section>`,
    )}
  </div>
  <p class="legend small">
    <span class="swatch unit-running"></span> running
    <span class="swatch unit-starting"></span> starting, waiting or stopping
    <span class="swatch unit-failed"></span> failed
    · rates from the record counts between polls; lag: records of its input not yet checkpointed
  </p>`;
}

/** Every unit, one row each. */
export function UnitTable({ cluster }) {
  const units = (cluster?.workers ?? []).flatMap((w) => w.units);
  if (units.length === 0) return null;
  units.sort((a, b) => (a.unit < b.unit ? -1 : a.unit > b.unit ? 1 : 0));
  return html`<table class="grid" aria-label="Units">
    <thead><tr><th>Unit</th><th>Role</th><th>Worker</th><th class="num">Version</th><th>State</th>
      <th class="num">Records in</th><th class="num">Records out</th><th class="num">In</th><th class="num">Out</th>
      <th>Event time</th><th class="num">Lag</th><th class="num">State size</th><th class="num">Checkpoint</th><th class="num">Restored from</th></tr></thead>
    <tbody>${units.map(
      (u) => html`<tr data-unit=${u.unit} data-worker=${u.worker}>
        <td><code>${u.unit}</code>${u.error && html`<div class="error small">${u.error}</div>`}</td>
        <td>${u.role}</td><td>${u.worker}</td><td class="num">${u.version}</td>
        <td><span class=${`badge unit-${u.state}`}>${u.state}</span></td>
        <td class="num">${formatCount(u.records_in)}</td><td class="num">${formatCount(u.records_out)}</td>
        <td class="num">${formatRate(u.inRate)}</td><td class="num">${formatRate(u.outRate)}</td>
        <td>${formatTime(u.watermark)}</td><td class="num">${formatCount(u.lag)}</td>
        <td class="num">${formatBytes(u.state_bytes)}</td><td class="num">${checkpoint(u.last_checkpoint)}</td>
        <td class="num">${checkpoint(u.restored_from)}</td>
      </tr>`,
    )}</tbody>
  </table>`;
}
