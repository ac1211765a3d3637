import assert from 'node:assert/strict';
import { test } from 'node:test';

import { layoutGraph, columns } from '../src/layout.js';
import {
  addSample,
  derivedRate,
  emptySeries,
  graphOf,
  headline,
  isCluster,
  keyedOperators,
  placement,
  pressure,
  throughKey,
  workersOf,
} from '../src/model.js';
import { parseRoute, pipelineHref, pipelinePath, query } from '../src/router.js';

const subtask = (n, extra = {}) => ({
  subtask: n,
  records_in: 100,
  records_out: 90,
  records_in_per_second: 10,
  records_out_per_second: 9,
  busy_ms_per_second: 100,
  backpressured_ms_per_second: 0,
  idle_ms_per_second: 900,
  watermark: null,
  ...extra,
});

const withMetrics = {
  name: 'orders',
  state: 'running',
  parallelism: 2,
  counts: { source_records: 1000, sink_records: 900 },
  metrics: {
    at: 1_000_000,
    records_in_per_second: 1234.5,
    records_out_per_second: 1200,
    watermark: 990_000,
    watermark_lag_ms: 10_000,
    operators: [
      { id: 'source', kind: 'source', subtasks: [subtask(0)] },
      { id: 'key', kind: 'key', subtasks: [subtask(0)] },
      { id: 'process', kind: 'keyed', subtasks: [subtask(0, { backpressured_ms_per_second: 700 }), subtask(1, { busy_ms_per_second: 800 })] },
      { id: 'sink', kind: 'sink', subtasks: [subtask(0)] },
      { id: 'side:late', kind: 'side_output', subtasks: [subtask(0)] },
    ],
    edges: [['source', 'key'], ['key', 'process'], ['process', 'sink'], ['process', 'side:late'], ['process', 'nowhere']],
    checkpoints: { completed: 3, failed: 0, last_duration_ms: 12, last_alignment_ms: 1, last_size_bytes: 2048, last_incremental_bytes: 100 },
  },
};

test('the headline numbers come from metrics when the server reports them', () => {
  const h = headline(withMetrics, undefined, 5);
  assert.deepEqual(
    { at: h.at, inRate: h.inRate, outRate: h.outRate, lagMs: h.lagMs },
    { at: 1_000_000, inRate: 1234.5, outRate: 1200, lagMs: 10_000 },
  );
});

test('without metrics, rates come from the counts between two polls and lag is unknown', () => {
  const status = (source, sink) => ({ name: 'p', state: 'running', counts: { source_records: source, sink_records: sink } });
  const first = headline(status(1000, 500), undefined, 10_000);
  assert.equal(first.inRate, null, 'one poll says nothing about a rate');
  const second = headline(status(3000, 1500), first, 12_000);
  assert.equal(second.inRate, 1000);
  assert.equal(second.outRate, 500);
  assert.equal(second.lagMs, null);
  const restarted = headline(status(10, 5), second, 13_000);
  assert.equal(restarted.inRate, null, 'counts that went back (a new run) give no rate');
  assert.equal(headline({ name: 'p', state: 'stopped', counts: null }, second, 14_000).inRate, null);
  assert.equal(derivedRate(1, 2, 1000, 1000), null);
});

test('load colours follow Flink: over half a second blocked is red, busy is orange', () => {
  assert.equal(pressure({ busy_ms_per_second: 100, backpressured_ms_per_second: 0 }), 'ok');
  assert.equal(pressure({ busy_ms_per_second: 600, backpressured_ms_per_second: 0 }), 'busy');
  assert.equal(pressure({ busy_ms_per_second: 100, backpressured_ms_per_second: 200 }), 'busy');
  assert.equal(pressure({ busy_ms_per_second: 100, backpressured_ms_per_second: 700 }), 'backpressured');
  assert.equal(pressure({}), 'unknown');
  assert.equal(pressure({ busy_ms_per_second: null, backpressured_ms_per_second: null }), 'unknown');
});

test('a source keeping to its pace is idle most of the second, so it is green', () => {
  // What the server reports of a generator paced far below what it can
  // read (its sleeps until events are due count as idle).
  const paced = { busy_ms_per_second: 31, backpressured_ms_per_second: 0, idle_ms_per_second: 969 };
  assert.equal(pressure(paced), 'ok');
});

test('the graph of metrics keeps their operators and drops edges to unknown ones', () => {
  const graph = graphOf(withMetrics, undefined, 0);
  assert.equal(graph.fromMetrics, true);
  assert.deepEqual(graph.nodes.map((n) => n.id), ['source', 'key', 'process', 'sink', 'side:late']);
  assert.deepEqual(graph.nodes[2].subtasks.map((s) => s.pressure), ['backpressured', 'busy']);
  assert.equal(graph.edges.length, 4);
  assert.deepEqual(keyedOperators(withMetrics), ['process']);
});

test('without metrics the graph is the line of the counts, with derived subtask rates', () => {
  const status = (n) => ({
    name: 'p',
    state: 'running',
    parallelism: 2,
    spec: 'name: p\n',
    counts: {
      source_records: n,
      key: { records_in: n, records_out: n, late_dropped: 0 },
      process: [],
      operators: [{ name: 'process', subtasks: [{ records_in: n / 2, records_out: n / 2 }, { records_in: n / 2, records_out: n / 2 }] }],
      sink_records: n,
    },
  });
  const first = graphOf(status(1000), undefined, 1000);
  assert.equal(first.fromMetrics, false);
  assert.deepEqual(first.nodes.map((n) => n.id), ['source', 'key', 'process', 'sink']);
  assert.deepEqual(first.edges, [['source', 'key'], ['key', 'process'], ['process', 'sink']]);
  const second = graphOf(status(3000), first, 2000);
  assert.equal(second.nodes[2].subtasks[1].inRate, 1000);
  assert.equal(second.nodes[0].subtasks[0].outRate, 2000);
  assert.equal(second.nodes[2].subtasks[0].pressure, 'unknown');
  const notRunning = graphOf({ name: 'p', state: 'stopped', parallelism: 3, spec: 'window: { type: tumbling }\n' }, undefined, 0);
  assert.deepEqual(notRunning.nodes.map((n) => n.id), ['source', 'key', 'window', 'sink']);
  assert.equal(notRunning.nodes[2].subtasks.length, 3, 'one box per subtask even before counts');
  assert.deepEqual(keyedOperators({ spec: 'name: p\n' }), ['process']);
});

test("edges from a source to a keyed stage go through the key node (key functions are chained)", () => {
  const nodes = [
    { id: 'orders', kind: 'source' },
    { id: 'payments', kind: 'source' },
    { id: 'key', kind: 'key' },
    { id: 'join', kind: 'keyed' },
    { id: 'main', kind: 'sink' },
    { id: 'late', kind: 'side_output' },
  ];
  const edges = [['orders', 'join'], ['payments', 'join'], ['orders', 'late'], ['join', 'main']];
  assert.deepEqual(throughKey(nodes, edges), [
    ['orders', 'key'], ['key', 'join'], ['payments', 'key'], ['orders', 'late'], ['join', 'main'],
  ]);
  const explicit = [['orders', 'key'], ['key', 'join']];
  assert.equal(throughKey(nodes, explicit), explicit, 'edges that name the key node stay');
  const status = { state: 'running', metrics: { at: 1, operators: nodes.map((n) => ({ ...n, subtasks: [] })), edges } };
  assert.deepEqual(Object.fromEntries(columns(graphOf(status, undefined, 0))), { orders: 0, payments: 0, key: 1, join: 2, main: 3, late: 3 });
});

test('the layout puts operators in columns by distance from the source', () => {
  const graph = graphOf(withMetrics, undefined, 0);
  const column = columns(graph);
  assert.deepEqual([...column.entries()], [['source', 0], ['key', 1], ['process', 2], ['sink', 3], ['side:late', 3]]);
  const layout = layoutGraph(graph);
  const at = Object.fromEntries(layout.nodes.map((n) => [n.id, n]));
  assert.ok(at.source.x < at.key.x && at.key.x < at.process.x && at.process.x < at.sink.x);
  assert.equal(at.sink.x, at['side:late'].x);
  assert.ok(at['side:late'].y > at.sink.y, 'side outputs below the main sink');
  assert.equal(at.process.subtasks.length, 2);
  assert.ok(at.process.subtasks[1].y > at.process.subtasks[0].y);
  for (const node of layout.nodes) {
    assert.ok(node.x >= 0 && node.y >= 0 && node.x + node.w <= layout.width && node.y + node.h <= layout.height, node.id);
    for (const s of node.subtasks) assert.ok(s.y + s.h <= node.y + node.h && s.x + s.w <= node.x + node.w);
  }
  assert.equal(layout.edges.length, 4);
  assert.match(layout.edges[0].d, /^M[\d.]+ [\d.]+ C/);
});

test('a graph without edges falls back to the usual order of kinds; cycles do not hang', () => {
  const nodes = [
    { id: 'sink', kind: 'sink', subtasks: [{}] },
    { id: 'source', kind: 'source', subtasks: [{}] },
    { id: 'p', kind: 'keyed', subtasks: [{}] },
  ];
  assert.deepEqual(Object.fromEntries(columns({ nodes, edges: [] })), { sink: 3, source: 0, p: 2 });
  const cyclic = columns({ nodes, edges: [['p', 'sink'], ['sink', 'p']] });
  assert.ok(cyclic.has('p') && cyclic.has('sink'));
});

test('chart samples keep the last five minutes, in order', () => {
  let series = emptySeries();
  for (let s = 0; s <= 400; s++) series = addSample(series, { at: s * 1000, inRate: s, outRate: s, lagMs: null });
  assert.equal(series.t.length, 301);
  assert.equal(series.t[0], 100);
  assert.equal(series.inRate[300], 400);
  assert.equal(addSample(series, { at: 400_000, inRate: 1, outRate: 1, lagMs: 1 }), series, 'a repeated sample is ignored');
});

test('routes and paths encode names', () => {
  assert.deepEqual(parseRoute(''), { page: 'pipelines' });
  assert.deepEqual(parseRoute('#/'), { page: 'pipelines' });
  assert.deepEqual(parseRoute('#/functions'), { page: 'functions' });
  assert.deepEqual(parseRoute('#/pipelines/orders'), { page: 'pipeline', name: 'orders' });
  assert.deepEqual(parseRoute(pipelineHref('a b/c')), { page: 'pipeline', name: 'a b/c' });
  assert.deepEqual(parseRoute('#/pipelines/%E0%A4%A'), { page: 'pipelines' });
  assert.equal(pipelinePath('a/b', '/stop'), '/v1/pipelines/a%2Fb/stop');
  assert.equal(query({ operator: 'process', state: 'total', key: 'a&b=c d' }), '?operator=process&state=total&key=a%26b%3Dc%20d');
  assert.equal(query({ a: null }), '');
});

const unit = (name, worker, extra = {}) => ({
  unit: name,
  worker,
  version: 1,
  role: name.includes('source') ? 'ingest' : 'task',
  state: 'running',
  records_in: 0,
  records_out: 0,
  watermark: null,
  lag: 0,
  state_bytes: null,
  last_checkpoint: null,
  restored_from: null,
  error: null,
  ...extra,
});

const onCluster = (n, extra = {}) => ({
  name: 'orders',
  state: 'running',
  parallelism: 2,
  metrics: null,
  counts: { source_records: 2 * n, sink_records: 2 * n },
  watermark: null,
  units: [
    unit('orders-source-0', 'w1', { records_in: n, records_out: n }),
    unit('orders-keyed-1', 'w2', { records_in: n, records_out: n, last_checkpoint: 7 }),
    unit('orders-keyed-0', 'w2', { records_in: n, records_out: n }),
    unit('orders-source-1', 'w1', { records_in: n, records_out: n, state: 'starting' }),
  ],
  ...extra,
});

test('a cluster pipeline is told by its units or waiting workers', () => {
  assert.equal(isCluster(onCluster(1)), true);
  assert.equal(isCluster({ units: [], waiting: { w3: 'no function' } }), true);
  assert.equal(isCluster(withMetrics), false);
  assert.equal(isCluster({ units: [], waiting: {} }), false);
  assert.equal(isCluster(null), false);
  assert.equal(placement(withMetrics), null);
  assert.deepEqual(placement(onCluster(1)), { units: 4, running: 3, workers: 2, waiting: 0 });
  assert.deepEqual(placement({ units: [], waiting: { w3: 'x' } }), { units: 0, running: 0, workers: 0, waiting: 1 });
});

test("a cluster's units are grouped by worker, with rates from their counts between polls", () => {
  const first = workersOf(onCluster(100), undefined, 10_000);
  assert.deepEqual(first.workers.map((w) => w.worker), ['w1', 'w2']);
  assert.deepEqual(first.workers[1].units.map((u) => u.unit), ['orders-keyed-0', 'orders-keyed-1']);
  assert.equal(first.workers[1].units[1].last_checkpoint, 7, 'the report is kept');
  assert.equal(first.workers[0].units[0].inRate, null, 'one poll says nothing about a rate');
  const second = workersOf(onCluster(300), first, 12_000);
  assert.equal(second.workers[0].units[0].inRate, 100);
  assert.equal(second.workers[1].units[0].outRate, 100);
  assert.equal(second.workers[0].units[1].inRate, null, 'a unit not running has no rate');
  // A unit that moved to another worker starts counting again there.
  const moved = onCluster(400);
  moved.units[1] = unit('orders-keyed-1', 'w1', { records_in: 5, records_out: 5 });
  const third = workersOf(moved, second, 13_000);
  assert.equal(third.workers[0].units.find((u) => u.unit === 'orders-keyed-1').inRate, null);
  // Workers waiting to run it are listed with their reason.
  const waiting = workersOf({ units: [], waiting: { w3: 'function revenue v2 not loaded' } }, undefined, 0);
  assert.deepEqual(waiting.workers, [{ worker: 'w3', waiting: 'function revenue v2 not loaded', units: [] }]);
  assert.deepEqual(workersOf(null, undefined, 0).workers, []);
});

test("a cluster pipeline's headline: rates from the summed counts, lag from its event time", () => {
  const first = headline(onCluster(100, { watermark: 50_000 }), undefined, 60_000);
  assert.equal(first.lagMs, 10_000);
  const second = headline(onCluster(300, { watermark: 50_000 }), first, 62_000);
  assert.deepEqual([second.inRate, second.outRate], [200, 200]);
  assert.equal(headline(onCluster(1), undefined, 0).lagMs, null, 'no event time, no lag');
  assert.equal(
    headline({ state: 'running', watermark: 1, counts: { source_records: 1 } }, undefined, 5).lagMs,
    null,
    'one machine without metrics: lag unknown, as before',
  );
});
