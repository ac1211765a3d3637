// One pipeline's page: its numbers, graph, charts, checkpoint history and
// function versions; the Savepoint, Stop, Upgrade and Delete actions (each
// confirmed in a dialog); the state lookup and the live tail. The status
// is polled every second while the tab is visible, the checkpoint history
// every five seconds and after each action.
//
// A pipeline on a cluster shows its units on their workers instead of the
// operator graph; what a cluster's server does not serve (the checkpoint
// history: `501 not_on_cluster`) is not offered, and its tail reads the
// outputs the server names (committed records of Kafka topics).

import {
  formatAge,
  formatBytes,
  formatCount,
  formatDuration,
  formatPlacement,
  formatRate,
  formatTime,
} from '../format.js';
import { usePoll } from '../hooks.js';
import { html, useRef, useState } from '../html.js';
import {
  addSample,
  emptySeries,
  graphOf,
  headline,
  isCluster,
  keyedOperators,
  placement,
  workersOf,
} from '../model.js';
import { pipelinePath } from '../router.js';
import { Charts } from './charts.js';
import { UnitTable, Workers } from './cluster.js';
import { Confirm, ErrorLine, Short, StateBadge } from './common.js';
import { Graph } from './graph.js';
import { StateLookup } from './state.js';
import { Tail } from './tail.js';

export function PipelinePage({ api, name }) {
  const [status, setStatus] = useState(null);
  const [error, setError] = useState(null);
  const [gone, setGone] = useState(false);
  const [samples, setSamples] = useState(emptySeries());
  const [graph, setGraph] = useState(null);
  const [checkpoints, setCheckpoints] = useState(null);
  const [checkpointsError, setCheckpointsError] = useState(null);
  const [dialog, setDialog] = useState(null); // savepoint | stop | upgrade | delete
  const [notice, setNotice] = useState(null);
  const [cluster, setCluster] = useState(null); // workersOf, on a cluster
  const last = useRef({ numbers: undefined, graph: undefined, cluster: undefined });
  // Known to be on a cluster: the status lists units, or the server said
  // `not_on_cluster` (a stopped cluster pipeline lists none). Sticky.
  const onCluster = useRef(false);

  usePoll(
    async () => {
      try {
        const answer = await api.get(pipelinePath(name));
        const now = Date.now();
        const numbers = headline(answer, last.current.numbers, now);
        const nextGraph = graphOf(answer, last.current.graph, now);
        const first = !last.current.numbers;
        if (isCluster(answer)) onCluster.current = true;
        const nextCluster = onCluster.current ? workersOf(answer, last.current.cluster, now) : undefined;
        last.current = { numbers, graph: nextGraph, cluster: nextCluster };
        setStatus(answer);
        setGraph(nextGraph);
        setCluster(nextCluster ?? null);
        if (first) loadCheckpoints();
        if (answer.state === 'running' || answer.metrics) setSamples((s) => addSample(s, numbers));
        setError(null);
      } catch (e) {
        if (e.status === 404) setGone(true);
        setError(e);
      }
    },
    1000,
    [name],
  );

  // After the first status (on a cluster there is no history to ask for).
  const loadCheckpoints = async () => {
    if (!last.current.numbers || onCluster.current) return;
    try {
      setCheckpoints((await api.get(pipelinePath(name, '/checkpoints')))?.checkpoints ?? []);
      setCheckpointsError(null);
    } catch (e) {
      if (e.code === 'not_on_cluster') onCluster.current = true;
      setCheckpointsError(e);
    }
  };
  usePoll(loadCheckpoints, 5000, [name]);

  if (gone) {
    return html`<section><h1>${name}</h1><${ErrorLine} error=${error} /><p><a href="#/">All pipelines</a></p></section>`;
  }
  if (!status) {
    return html`<section><h1>${name}</h1>${error ? html`<${ErrorLine} error=${error} />` : html`<p class="muted">Loading…</p>`}</section>`;
  }

  const numbers = last.current.numbers ?? {};
  const metrics = status.metrics ?? null;
  const running = status.state === 'running';
  const clustered = onCluster.current;
  // On a cluster the server names the outputs it can tail (Kafka topics).
  const outputs = clustered
    ? status.outputs ?? []
    : (metrics?.operators ?? [])
        .filter((op) => op.kind === 'sink' || op.kind === 'side_output')
        .map((op) => String(op.id).replace(/^side:/, ''));
  const close = () => setDialog(null);
  const done = (message) => {
    setNotice(message);
    loadCheckpoints();
  };

  return html`<section>
    <div class="title-row">
      <h1><a href="#/" class="muted">Pipelines</a> / ${status.name}</h1>
      <${StateBadge} state=${status.state} />
      <span class="spacer"></span>
      <div class="actions">
        <button type="button" disabled=${!running} onClick=${() => setDialog('savepoint')}>Savepoint</button>
        <button type="button" disabled=${!running} onClick=${() => setDialog('stop')}>Stop</button>
        <button type="button" disabled=${!running && !clustered} onClick=${() => setDialog('upgrade')}>Upgrade</button>
        <button type="button" class="danger" onClick=${() => setDialog('delete')}>Delete</button>
      </div>
    </div>
    ${notice && html`<p class="notice" role="status">${notice}</p>`}
    <${ErrorLine} error=${error} />
    ${status.failure && html`<p class="error">Failed: ${status.failure}</p>`}
    ${status.restart?.next_attempt_at &&
    html`<p class="notice">Restarting at ${formatTime(status.restart.next_attempt_at)} (restart ${status.restart.restarts + 1}); last failure: ${status.restart.last_failure ?? '—'}</p>`}

    <dl class="stats">
      <div><dt>Records in</dt><dd data-field="in-rate">${formatRate(numbers.inRate)}</dd></div>
      <div><dt>Records out</dt><dd data-field="out-rate">${formatRate(numbers.outRate)}</dd></div>
      <div><dt>Watermark lag</dt><dd data-field="lag">${formatDuration(numbers.lagMs)}</dd></div>
      <div><dt>Watermark</dt><dd>${formatTime(metrics?.watermark ?? status.watermark)}</dd></div>
      <div><dt>Read / written</dt><dd>${formatCount(status.counts?.source_records)} / ${formatCount(status.counts?.sink_records)}</dd></div>
      <div><dt>Parallelism</dt><dd>${status.parallelism}</dd></div>
      <div><dt>Generation</dt><dd>${status.generation}</dd></div>
      ${clustered
        ? html`<div><dt>Deployed</dt><dd>${formatTime(status.deployed_at)}</dd></div>
            <div><dt>Units</dt><dd data-field="placement">${formatPlacement(placement(status) ?? { units: 0, running: 0, workers: 0, waiting: 0 })}</dd></div>`
        : html`<div><dt>Started</dt><dd>${formatTime(status.started_at)}</dd></div>
            <div><dt>Last checkpoint</dt><dd>${status.last_checkpoint ? formatAge(Date.now(), status.last_checkpoint.completed_at) : '—'}</dd></div>
            <div><dt>Restored from</dt><dd>${status.restored_from ? `${status.restored_from.kind} ${status.restored_from.id}` : '—'}</dd></div>`}
    </dl>

    ${clustered
      ? html`<h2>Workers</h2>
          <${Workers} cluster=${cluster} />
          <h2>Units</h2>
          <${UnitTable} cluster=${cluster} />`
      : html`<h2>Graph</h2>
          <${Graph} graph=${graph} />`}

    <h2>Rates</h2>
    <${Charts} samples=${samples} />

    <h2>Checkpoints</h2>
    ${clustered
      ? html`<p class="muted" data-field="checkpoints-note">Each unit checkpoints on its own: its last checkpoint is in the units above.
          ${checkpointsError?.code === 'not_on_cluster' && ` (${checkpointsError.message})`}</p>`
      : html`<${CheckpointStats} stats=${metrics?.checkpoints} completed=${status.snapshots_completed} />
          <${ErrorLine} error=${checkpointsError} />
          <${CheckpointTable} checkpoints=${checkpoints} />`}

    <h2>Functions</h2>
    ${status.functions.length === 0
      ? html`<p class="muted">No stored functions.</p>`
      : html`<table class="grid" aria-label="Function versions">
          <thead><tr><th>Field</th><th>Function</th><th class="num">Version</th></tr></thead>
          <tbody>${status.functions.map(
            (f) => html`<tr><td><code>${f.field}</code></td><td><a href="#/functions">${f.function}</a></td><td class="num">${f.version}</td></tr>`,
          )}</tbody>
        </table>`}

    <h2>State lookup</h2>
    <${StateLookup} api=${api} name=${status.name} operators=${keyedOperators(status)} />

    <h2>Tail</h2>
    ${clustered && outputs.length === 0
      ? html`<p class="muted">On a cluster only outputs written to Kafka can be tailed; this pipeline has none.</p>`
      : html`<${Tail} api=${api} name=${status.name} outputs=${outputs} />`}

    <details class="spec"><summary>Spec</summary><pre>${status.spec}</pre></details>

    <${Confirm} open=${dialog === 'savepoint'} title="Take a savepoint"
      message=${`Take a savepoint of ${status.name}? It keeps running.`} onClose=${close}
      choices=${[{ label: 'Take savepoint', run: () => api.post(pipelinePath(name, '/savepoints'), {}) }]}
      onDone=${(r) => done(`Savepoint taken: ${r?.location ?? ''}`)} />
    <${Confirm} open=${dialog === 'stop'} title="Stop the pipeline"
      message=${clustered
        ? `Stop ${status.name}? With a savepoint its units are drained first (a savepoint one machine can restore too); without, every unit stops with a final checkpoint, which a start (Upgrade) restores.`
        : `Stop ${status.name}? Records in flight are processed and a final snapshot is taken. Take a savepoint (restorable at another parallelism or function version) or only a checkpoint?`}
      onClose=${close}
      choices=${[
        { label: 'Stop with savepoint', run: () => api.post(pipelinePath(name, '/stop'), { savepoint: true }) },
        { label: 'Stop without savepoint', danger: true, run: () => api.post(pipelinePath(name, '/stop'), { savepoint: false }) },
      ]}
      onDone=${(r) => done(r?.location ? `Stopped; final snapshot: ${r.location}` : 'Stopped.')} />
    <${UpgradeDialog} api=${api} status=${status} clustered=${clustered} open=${dialog === 'upgrade'} onClose=${close}
      onDone=${(r) => done(`Upgraded to generation ${r?.generation ?? '?'}.`)} />
    <${Confirm} open=${dialog === 'delete'} title="Delete the pipeline"
      message=${`Delete ${status.name}? It is stopped and its local state and checkpoints are deleted; savepoints are kept.`}
      onClose=${close}
      choices=${[{ label: 'Delete', danger: true, run: () => api.del(pipelinePath(name)) }]}
      onDone=${() => {
        location.hash = '#/';
      }} />
  </section>`;
}

/** The coordinator's checkpoint counters, when the server reports them. */
function CheckpointStats({ stats, completed }) {
  const v = (x) => (x === null || x === undefined ? null : x);
  return html`<dl class="stats small-stats">
    <div><dt>Completed</dt><dd data-field="checkpoints-completed">${formatCount(v(stats?.completed) ?? completed)}</dd></div>
    <div><dt>Failed</dt><dd>${formatCount(v(stats?.failed))}</dd></div>
    <div><dt>Last duration</dt><dd data-field="checkpoint-duration">${formatDuration(v(stats?.last_duration_ms))}</dd></div>
    <div><dt>Last alignment</dt><dd>${formatDuration(v(stats?.last_alignment_ms))}</dd></div>
    <div><dt>Last size</dt><dd>${formatBytes(v(stats?.last_size_bytes))}</dd></div>
    <div><dt>Last uploaded</dt><dd>${formatBytes(v(stats?.last_incremental_bytes))}</dd></div>
  </dl>`;
}

function CheckpointTable({ checkpoints }) {
  if (checkpoints === null) return html`<p class="muted">Loading…</p>`;
  if (checkpoints.length === 0) return html`<p class="muted">No completed checkpoints or savepoints.</p>`;
  return html`<table class="grid" aria-label="Checkpoint history">
    <thead><tr><th class="num">Id</th><th>Kind</th><th>Completed</th><th class="num">Duration</th>
      <th class="num">Alignment</th><th class="num">Size</th><th class="num">Uploaded</th><th>Location</th></tr></thead>
    <tbody>${checkpoints.map(
      (c) => html`<tr data-kind=${c.kind}>
        <td class="num">${c.id}</td><td>${c.kind}</td><td>${formatTime(c.completed_at)}</td>
        <td class="num">${formatDuration(c.duration_ms)}</td><td class="num">${formatDuration(c.alignment_ms)}</td>
        <td class="num">${formatBytes(c.size_bytes)}</td>
        <td class="num">${formatBytes(c.incremental_bytes)}</td><td><${Short} text=${c.location} keep=${48} /></td>
      </tr>`,
    )}</tbody>
  </table>`;
}

/** The upgrade body (see `Upgrade` in the API): new function versions,
 * parallelism or spec; prefilled with every function at `latest`. */
function UpgradeDialog({ api, status, clustered, open, onClose, onDone }) {
  const template = () =>
    JSON.stringify(
      {
        functions: Object.fromEntries(status.functions.map((f) => [f.function, 'latest'])),
        parallelism: status.parallelism,
      },
      null,
      2,
    );
  const [body, setBody] = useState(null);
  const text = body ?? template();
  const run = async () => {
    let parsed;
    try {
      parsed = JSON.parse(text);
    } catch (e) {
      throw new Error(`The upgrade is not JSON: ${e.message}`);
    }
    const answer = await api.post(pipelinePath(status.name, '/upgrade'), JSON.stringify(parsed));
    setBody(null);
    return answer;
  };
  return html`<${Confirm} open=${open} title="Upgrade the pipeline" onClose=${onClose} onDone=${onDone}
    message=${clustered
      ? 'The workers switch to the new version (a stopped pipeline starts again); its units restore the old ones\' final checkpoints, so state is kept. A new parallelism drains the old tasks first and hands each new task its key groups\' state.'
      : 'A savepoint is taken, the pipeline stopped and started again from it with these changes; state is kept.'}
    choices=${[{ label: 'Upgrade', run }]}>
    <label>Upgrade (JSON: <code>functions</code> by name, a version or <code>"latest"</code>; <code>parallelism</code>; or a whole new <code>spec</code>)
      <textarea name="upgrade" rows="8" spellcheck="false" value=${text} onInput=${(e) => setBody(e.currentTarget.value)}></textarea>
    </label>
  <//>`;
}
