// The operator graph as SVG: one box per operator, one per subtask inside
// it coloured by its load (green ok, orange busy, red backpressured, grey
// unknown) and labelled with its rate; edges in the direction of flow.

import { formatBytes, formatRate } from '../format.js';
import { html } from '../html.js';
import { layoutGraph } from '../layout.js';

const LABELS = { ok: 'ok', busy: 'busy', backpressured: 'backpressured', unknown: 'load unknown' };

const KIND_LABELS = { source: 'source', key: 'key', keyed: 'keyed', sink: 'sink', side_output: 'side output' };

/** The subtask's rate: what it emits, or for a sink what it takes in. */
function rateOf(node, subtask) {
  const rate = node.kind === 'sink' || node.kind === 'side_output' ? subtask.inRate : subtask.outRate ?? subtask.inRate;
  return formatRate(rate);
}

function tooltip(node, subtask) {
  const ms = (v) => (v === null || v === undefined ? '—' : `${Math.round(v)} ms/s`);
  const lines = [
    `${node.id} #${subtask.subtask}: ${LABELS[subtask.pressure]}`,
    `in ${formatRate(subtask.inRate)}, out ${formatRate(subtask.outRate)}`,
    `busy ${ms(subtask.busy)}, backpressured ${ms(subtask.backpressured)}, idle ${ms(subtask.idle)}`,
  ];
  if (subtask.callMs != null) lines.push(`in function calls ${ms(subtask.callMs)}`);
  if (subtask.batch) lines.push(`${Math.round(subtask.batch)} records per batch`);
  if (subtask.stateBytes != null) lines.push(`state ${formatBytes(subtask.stateBytes)}`);
  if (subtask.cacheHits != null) lines.push(`state cache hits ${Math.round(subtask.cacheHits * 100)}%`);
  return lines.join('\n');
}

export function Graph({ graph }) {
  if (!graph || graph.nodes.length === 0) return html`<p class="muted">No graph yet.</p>`;
  const layout = layoutGraph(graph);
  return html`<div class="graph-wrap">
    <svg class="graph" role="img" aria-label="Operator graph" width=${layout.width} height=${layout.height}
      viewBox=${`0 0 ${layout.width} ${layout.height}`}>
      <defs>
        <marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse">
          <path d="M0 0 L10 5 L0 10 z" class="arrow" />
        </marker>
      </defs>
      ${layout.edges.map((e) => html`<path class="edge" d=${e.d} marker-end="url(#arrow)"><title>${e.from} → ${e.to}</title></path>`)}
      ${layout.nodes.map(
        (node) => html`<g class=${`node kind-${node.kind}`} data-operator=${node.id}>
          <rect class="operator" x=${node.x} y=${node.y} width=${node.w} height=${node.h} rx="6" />
          <text class="operator-name" x=${node.x + 8} y=${node.y + 15}>${node.id}
            <tspan class="operator-kind">${node.kind === 'keyed' || node.id === node.kind ? '' : ` ${KIND_LABELS[node.kind] ?? ''}`}</tspan></text>
          ${node.subtasks.length === 0 &&
          html`<text class="operator-kind" x=${node.x + 8} y=${node.y + 40}>on the first sink's thread</text>`}
          ${node.subtasks.map(
            (s) => html`<g class=${`subtask pressure-${s.pressure}`} data-subtask=${s.subtask} data-pressure=${s.pressure}>
              <title>${tooltip(node, s)}</title>
              <rect x=${s.x} y=${s.y} width=${s.w} height=${s.h} rx="4" />
              <text class="subtask-label" x=${s.x + 8} y=${s.y + 16}>#${s.subtask} ${LABELS[s.pressure]}</text>
              <text class="subtask-rate" x=${s.x + 8} y=${s.y + 31}>${rateOf(node, s)}</text>
            </g>`,
          )}
        </g>`,
      )}
    </svg>
    <p class="legend small">
      <span class="swatch pressure-ok"></span> ok
      <span class="swatch pressure-busy"></span> busy (over 500 ms/s working, or over 100 ms/s blocked)
      <span class="swatch pressure-backpressured"></span> backpressured (over 500 ms/s blocked on output)
      <span class="swatch pressure-unknown"></span> unknown
      ${!graph.fromMetrics && html` · rates from the record counts (this server reports no per-subtask metrics)`}
    </p>
  </div>`;
}
