// What the console reads out of a pipeline's status (`GET
// /v1/pipelines/{name}`): rates, watermark lag, the operator graph with
// each subtask's rates and pressure, and the samples of the charts. Pure
// functions, no DOM.
//
// A server that reports `metrics` gives rates, busy and backpressured time
// per subtask and the graph's edges. Without them (an older server, or a
// pipeline that is not running) the rates are worked out from the change
// of the record counts between two polls, the graph from the counts'
// stages, and whatever cannot be known is left `null` (shown as "—").
//
// A pipeline on a cluster (`weir serve --cluster`) has no metrics; its
// status lists its `units`, each with the worker running it, and the
// workers `waiting` to run it: `placement` and `workersOf` read them.

/**
 * A pipeline's headline numbers. `previous` is the value this function
 * returned for the same pipeline at the last poll (or undefined), `now` the
 * client's clock (ms); returns `{ at, inRate, outRate, lagMs, source, sink }`.
 */
export function headline(status, previous, now) {
  const metrics = status?.metrics ?? null;
  const source = status?.counts?.source_records ?? null;
  const sink = status?.counts?.sink_records ?? null;
  const at = metrics?.at ?? now;
  let inRate = num(metrics?.records_in_per_second);
  let outRate = num(metrics?.records_out_per_second);
  let lagMs = num(metrics?.watermark_lag_ms);
  if (!metrics) {
    inRate = derivedRate(previous?.source, source, previous?.at, at);
    outRate = derivedRate(previous?.sink, sink, previous?.at, at);
    // A cluster's status has no metrics but the units' event time.
    if (isCluster(status) && num(status.watermark) !== null) lagMs = Math.max(0, now - status.watermark);
  }
  return { at, inRate, outRate, lagMs, source, sink };
}

/** Records per second between two counts `dt` ms apart; null when unknown
 * (no previous sample, a counter that went back after a restart). */
export function derivedRate(before, after, beforeAt, afterAt) {
  if ([before, after, beforeAt, afterAt].some((v) => typeof v !== 'number')) return null;
  const dt = afterAt - beforeAt;
  if (dt <= 0 || after < before) return null;
  return ((after - before) * 1000) / dt;
}

const num = (v) => (typeof v === 'number' && Number.isFinite(v) ? v : null);

/**
 * How loaded a subtask is, Flink's way: `backpressured` (red) when it spends
 * more than half of each second blocked on its output, `busy` (orange) when
 * it spends more than half working or more than a tenth blocked, `ok`
 * (green) otherwise; `unknown` (grey) without the numbers.
 */
export function pressure(subtask) {
  const bp = num(subtask?.backpressured_ms_per_second);
  const busy = num(subtask?.busy_ms_per_second);
  if (bp === null && busy === null) return 'unknown';
  if ((bp ?? 0) > 500) return 'backpressured';
  if ((busy ?? 0) > 500 || (bp ?? 0) > 100) return 'busy';
  return 'ok';
}

/**
 * The operator graph: `{ nodes: [{ id, kind, subtasks: [{ subtask,
 * inRate, outRate, busy, backpressured, idle, pressure, recordsIn,
 * recordsOut }] }], edges: [[from, to]] }`. From `metrics` when the
 * server gives them; else from the counts (source → key → stages → sink,
 * rates from `previous`, the graph this function returned at the last
 * poll, and the time between).
 */
export function graphOf(status, previous, now) {
  const metrics = status?.metrics;
  if (metrics && Array.isArray(metrics.operators) && metrics.operators.length > 0) {
    const nodes = metrics.operators.map((op) => ({
      id: String(op.id),
      kind: op.kind ?? 'keyed',
      subtasks: (op.subtasks ?? []).map((s) => ({
        subtask: s.subtask ?? 0,
        inRate: num(s.records_in_per_second),
        outRate: num(s.records_out_per_second),
        busy: num(s.busy_ms_per_second),
        backpressured: num(s.backpressured_ms_per_second),
        idle: num(s.idle_ms_per_second),
        pressure: pressure(s),
        recordsIn: num(s.records_in),
        recordsOut: num(s.records_out),
        callMs: num(s.call_ms_per_second),
        batch: num(s.average_batch_size),
        stateBytes: num(s.state_bytes),
        cacheHits: num(s.cache_hit_ratio),
      })),
    }));
    const ids = new Set(nodes.map((n) => n.id));
    const edges = (metrics.edges ?? [])
      .filter((e) => Array.isArray(e) && ids.has(String(e[0])) && ids.has(String(e[1])))
      .map(([a, b]) => [String(a), String(b)]);
    return { at: metrics.at ?? now, fromMetrics: true, nodes, edges: throughKey(nodes, edges) };
  }
  return countsGraph(status, previous, now);
}

/**
 * Key functions run chained into their sources, so the server's edges go
 * from a source straight to a keyed stage; draw them through the key node
 * (when it is in no edge of its own): source → key → keyed.
 */
export function throughKey(nodes, edges) {
  const key = nodes.find((n) => n.kind === 'key');
  if (!key || edges.some(([a, b]) => a === key.id || b === key.id)) return edges;
  const kind = new Map(nodes.map((n) => [n.id, n.kind]));
  const rerouted = [];
  const seen = new Set();
  const add = (a, b) => {
    if (!seen.has(`${a}\u0000${b}`)) {
      seen.add(`${a}\u0000${b}`);
      rerouted.push([a, b]);
    }
  };
  for (const [a, b] of edges) {
    if (kind.get(a) === 'source' && kind.get(b) === 'keyed') {
      add(a, key.id);
      add(key.id, b);
    } else {
      add(a, b);
    }
  }
  return rerouted;
}

function countsGraph(status, previous, now) {
  const counts = status?.counts;
  const rateOf = (id, index, field, value) => {
    const before = previous?.nodes
      ?.find((n) => n.id === id)
      ?.subtasks?.find((s) => s.subtask === index)?.[field];
    return status?.state === 'running' ? derivedRate(before, value, previous?.at, now) : null;
  };
  const subtask = (id, index, recordsIn, recordsOut) => ({
    subtask: index,
    inRate: rateOf(id, index, 'recordsIn', recordsIn),
    outRate: rateOf(id, index, 'recordsOut', recordsOut),
    busy: null,
    backpressured: null,
    idle: null,
    pressure: 'unknown',
    recordsIn: num(recordsIn),
    recordsOut: num(recordsOut),
  });
  const stages =
    counts?.operators?.length > 0
      ? counts.operators.map((op) => ({ id: op.name, subtasks: op.subtasks }))
      : [{ id: stageName(status), subtasks: counts?.process ?? [] }];
  const parallelism = Math.max(1, status?.parallelism ?? 1);
  const nodes = [
    { id: 'source', kind: 'source', subtasks: [subtask('source', 0, null, counts?.source_records)] },
    {
      id: 'key',
      kind: 'key',
      subtasks: [subtask('key', 0, counts?.key?.records_in, counts?.key?.records_out)],
    },
    ...stages.map((stage) => ({
      id: stage.id,
      kind: 'keyed',
      subtasks: (stage.subtasks.length > 0
        ? stage.subtasks
        : Array.from({ length: parallelism }, () => ({}))
      ).map((s, i) => subtask(stage.id, i, s.records_in, s.records_out)),
    })),
    { id: 'sink', kind: 'sink', subtasks: [subtask('sink', 0, counts?.sink_records, null)] },
  ];
  const chain = nodes.map((n) => n.id);
  const edges = chain.slice(1).map((id, i) => [chain[i], id]);
  return { at: now, fromMetrics: false, nodes, edges };
}

/** The keyed stage of a line spec: `window` when the spec has one. */
function stageName(status) {
  return /^window\s*:/m.test(status?.spec ?? '') ? 'window' : 'process';
}

/** The keyed operators' names, the first one a state lookup should try. */
export function keyedOperators(status) {
  const fromMetrics = (status?.metrics?.operators ?? [])
    .filter((op) => op.kind === 'keyed')
    .map((op) => String(op.id));
  if (fromMetrics.length > 0) return fromMetrics;
  const fromCounts = (status?.counts?.operators ?? []).map((op) => op.name);
  if (fromCounts.length > 0) return fromCounts;
  return [stageName(status)];
}

/**
 * The charts' samples: `{ t: [s], inRate: [], outRate: [], lag: [] }`,
 * the last `windowMs` before the newest, oldest first. Returns a new
 * object; a sample at or before the last one is ignored.
 */
export function addSample(series, sample, windowMs = 5 * 60 * 1000) {
  const t = sample.at / 1000;
  const last = series.t.length > 0 ? series.t[series.t.length - 1] : -Infinity;
  if (!(t > last)) return series;
  const from = t - windowMs / 1000;
  let skip = 0;
  while (skip < series.t.length && series.t[skip] < from) skip++;
  return {
    t: series.t.slice(skip).concat(t),
    inRate: series.inRate.slice(skip).concat(sample.inRate),
    outRate: series.outRate.slice(skip).concat(sample.outRate),
    lag: series.lag.slice(skip).concat(sample.lagMs),
  };
}

/** No samples yet. */
export const emptySeries = () => ({ t: [], inRate: [], outRate: [], lag: [] });

/** Whether `status` is a cluster pipeline's: it lists units, waiting workers or Kafka outputs. */
export function isCluster(status) {
  return (
    (status?.units?.length ?? 0) > 0 ||
    Object.keys(status?.waiting ?? {}).length > 0 ||
    (status?.outputs?.length ?? 0) > 0
  );
}

/**
 * Where a cluster pipeline runs: `{ units, running, workers, waiting }`
 * (counts: its units, those running, the workers running any, the workers
 * waiting); null for a pipeline that is not on a cluster.
 */
export function placement(status) {
  if (!isCluster(status)) return null;
  const units = status.units ?? [];
  return {
    units: units.length,
    running: units.filter((u) => u.state === 'running').length,
    workers: new Set(units.map((u) => u.worker)).size,
    waiting: Object.keys(status.waiting ?? {}).length,
  };
}

/**
 * A cluster pipeline's units by worker: `{ at, workers: [{ worker,
 * waiting, units }] }`, workers by name, each unit as reported plus
 * `inRate` and `outRate` (records per second since `previous`, the value
 * this function returned at the last poll, while it runs on the same
 * worker). A worker that is waiting to run it is listed with its reason.
 */
export function workersOf(status, previous, now) {
  const before = new Map();
  for (const w of previous?.workers ?? []) for (const u of w.units) before.set(`${w.worker}\u0000${u.unit}`, u);
  const byWorker = new Map();
  const entry = (worker) => {
    if (!byWorker.has(worker)) byWorker.set(worker, { worker, waiting: null, units: [] });
    return byWorker.get(worker);
  };
  for (const unit of status?.units ?? []) {
    const last = before.get(`${unit.worker}\u0000${unit.unit}`);
    const rate = (field) =>
      unit.state === 'running' ? derivedRate(last?.[field], unit[field], previous?.at, now) : null;
    entry(unit.worker).units.push({ ...unit, inRate: rate('records_in'), outRate: rate('records_out') });
  }
  for (const [worker, why] of Object.entries(status?.waiting ?? {})) entry(worker).waiting = why;
  const workers = [...byWorker.values()].sort((a, b) => (a.worker < b.worker ? -1 : a.worker > b.worker ? 1 : 0));
  for (const w of workers) w.units.sort((a, b) => (a.unit < b.unit ? -1 : a.unit > b.unit ? 1 : 0));
  return { at: now, workers };
}
