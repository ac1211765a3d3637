// A stand-in for `weir serve` for the UI test: serves console/dist with
// the headers host/src/api/console.rs sends (its CSP read from that file)
// and answers the API with canned pipelines, including the fields newer
// servers add (metrics, state lookup, tail). It records the requests that
// change things, so the test can check what the console sent.

import { createServer } from 'node:http';
import { readFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');

/** The CSP `weir` sends, read from its source. */
export async function hostCsp() {
  const source = await readFile(join(root, '..', 'host', 'src', 'api', 'console.rs'), 'utf8');
  const match = source.match(/CONTENT_SECURITY_POLICY: &str = "((?:[^"\\]|\\\n)*)"/);
  if (!match) throw new Error('no CONTENT_SECURITY_POLICY in host/src/api/console.rs');
  return match[1].replace(/\\\n\s*/g, '');
}

const subtask = (n, busy, backpressured, rate) => ({
  subtask: n,
  records_in: 1000 * (n + 1),
  records_out: 1000 * (n + 1),
  records_in_per_second: rate,
  records_out_per_second: rate,
  busy_ms_per_second: busy,
  backpressured_ms_per_second: backpressured,
  idle_ms_per_second: 1000 - busy - backpressured,
  watermark: 1_768_471_200_000,
});

function status(name, state, at) {
  const running = state === 'running';
  return {
    name,
    state,
    failure: null,
    generation: 1,
    deployed_at: at - 60_000,
    started_at: at - 60_000,
    parallelism: 2,
    functions: [
      { field: 'key', function: 'revenue', version: 1 },
      { field: 'process', function: 'revenue', version: 1 },
    ],
    counts: {
      source_records: 5000,
      key: { records_in: 5000, records_out: 5000, late_dropped: 0 },
      process: [],
      operators: [{ name: 'process', subtasks: [{ records_in: 2500, records_out: 2500, late_dropped: 0 }, { records_in: 2500, records_out: 2500, late_dropped: 0 }] }],
      sink_records: 5000,
      side_outputs_written: 3,
      side_outputs_dropped: 0,
      dropped_bad_timestamps: 0,
    },
    watermark: 1_768_471_200_000,
    restored_from: null,
    snapshots_completed: 2,
    last_checkpoint: { id: 2, kind: 'checkpoint', completed_at: at - 3000, size_bytes: 40960, incremental_bytes: 1024, duration_ms: 35, alignment_ms: 2, location: '/data/checkpoints/orders/chk-2' },
    last_savepoint: null,
    restart: { restarts: 0, last_failure: null, next_attempt_at: null },
    spec: 'name: orders\n',
    metrics: running
      ? {
          at,
          records_in_per_second: 1500 + (at % 7) * 10,
          records_out_per_second: 1490,
          watermark: 1_768_471_200_000,
          watermark_lag_ms: 4200,
          operators: [
            { id: 'source', kind: 'source', subtasks: [subtask(0, 200, 0, 1500)] },
            { id: 'key', kind: 'key', subtasks: [subtask(0, 300, 0, 1500)] },
            { id: 'process', kind: 'keyed', subtasks: [subtask(0, 800, 0, 750), subtask(1, 100, 700, 750)] },
            { id: 'main', kind: 'sink', subtasks: [subtask(0, 50, 0, 1490)] },
            { id: 'late', kind: 'side_output', subtasks: [] },
          ],
          edges: [['source', 'key'], ['key', 'process'], ['process', 'main'], ['process', 'late']],
          checkpoints: { completed: 2, failed: 1, last_duration_ms: 35, last_alignment_ms: 2, last_size_bytes: 40960, last_incremental_bytes: 1024 },
        }
      : null,
  };
}

/** A pipeline on a cluster (`fleet`): units on two workers, one failed,
 * and a third worker waiting; `stopped`: no unit reports it any more. */
function clusterStatus(at, stopped) {
  const unit = (name, worker, state, n, extra = {}) => ({
    unit: `fleet-${name}`,
    worker,
    version: 2,
    role: name.startsWith('source') ? 'ingest' : 'task',
    state,
    records_in: n,
    records_out: n,
    watermark: 1_768_471_200_000,
    lag: 12,
    state_bytes: name.startsWith('keyed') ? 4096 : null,
    last_checkpoint: 41,
    restored_from: 40,
    error: null,
    ...extra,
  });
  const n = Math.floor(at / 10);
  return {
    ...status('fleet', stopped ? 'stopped' : 'running', at),
    generation: 2,
    started_at: null,
    restored_from: null,
    snapshots_completed: 0,
    last_checkpoint: null,
    metrics: null,
    counts: stopped ? null : { source_records: 2 * n, key: { records_in: 0, records_out: 0, late_dropped: 0 }, process: [], operators: [], sink_records: 2 * n },
    watermark: stopped ? null : 1_768_471_200_000,
    failure: stopped ? null : 'unit fleet-keyed-1 on w2: function trapped',
    units: stopped
      ? undefined
      : [
          unit('keyed-0', 'w1', 'running', n),
          unit('keyed-1', 'w2', 'failed', 0, { error: 'function trapped' }),
          unit('source-0', 'w1', 'running', n),
          unit('source-1', 'w2', 'starting', n),
        ],
    waiting: stopped ? undefined : { w3: 'function revenue version 2 is not loaded yet' },
    outputs: stopped ? undefined : ['main'],
  };
}

/** Start the stub on a free port (`token` null: none needed); `{ url, requests, close }`. */
export async function startStub({ token }) {
  const csp = await hostCsp();
  const files = {
    '/console/': ['text/html; charset=utf-8', await readFile(join(root, 'dist', 'index.html'))],
    '/console/console.js': ['text/javascript; charset=utf-8', await readFile(join(root, 'dist', 'console.js'))],
    '/console/console.css': ['text/css; charset=utf-8', await readFile(join(root, 'dist', 'console.css'))],
  };
  const requests = [];
  const timers = new Set();
  let state = 'running';
  const checkpoints = [
    { id: 2, kind: 'checkpoint', completed_at: Date.now() - 3000, size_bytes: 40960, incremental_bytes: 1024, duration_ms: 35, alignment_ms: 2, location: '/data/checkpoints/orders/chk-2' },
  ];
  const server = createServer(async (req, res) => {
    const url = new URL(req.url, 'http://stub');
    const chunks = [];
    for await (const c of req) chunks.push(c);
    const body = Buffer.concat(chunks);
    const json = (code, value) => {
      res.writeHead(code, { 'content-type': 'application/json' });
      res.end(JSON.stringify(value));
    };
    const error = (code, name, message) => json(code, { error: { code: name, message } });
    if (files[url.pathname]) {
      const [type, bytes] = files[url.pathname];
      res.writeHead(200, { 'content-type': type, 'content-security-policy': csp, 'cache-control': 'no-cache', 'x-content-type-options': 'nosniff' });
      res.end(bytes);
      return;
    }
    if (!url.pathname.startsWith('/v1/')) return error(404, 'not_found', 'no such route');
    if (token !== null && req.headers.authorization !== `Bearer ${token}`) {
      return error(401, 'unauthorized', 'a valid `Authorization: Bearer <token>` header is required');
    }
    if (req.method !== 'GET') {
      requests.push({ method: req.method, path: url.pathname, type: req.headers['content-type'] ?? null, body });
    }
    const now = Date.now();
    const route = `${req.method} ${url.pathname}`;
    switch (route) {
      case 'GET /v1/pipelines':
        return json(200, { pipelines: [status('orders', state, now)] });
      case 'POST /v1/pipelines':
        if (!body.toString().includes('name:')) return error(400, 'invalid_spec', 'invalid spec: name: missing field');
        return json(201, { ...status('orders', 'running', now), name: body.toString().match(/name: (\S+)/)[1] });
      case 'GET /v1/pipelines/orders':
        return json(200, status('orders', state, now));
      case 'GET /v1/pipelines/orders/checkpoints':
        return json(200, { checkpoints });
      case 'POST /v1/pipelines/orders/savepoints':
        checkpoints.unshift({ id: 3, kind: 'savepoint', completed_at: now, size_bytes: 50000, incremental_bytes: 50000, duration_ms: 40, alignment_ms: 0, location: '/data/savepoints/orders/sp-3' });
        return json(201, { state: 'running', location: '/data/savepoints/orders/sp-3' });
      case 'POST /v1/pipelines/orders/stop':
        state = 'stopped';
        return json(200, { state: 'stopped', location: '/data/savepoints/orders/sp-4' });
      case 'GET /v1/pipelines/orders/state': {
        const p = url.searchParams;
        // As weir answers: the bytes as hex unless `decode` says otherwise.
        const found = p.get('key') === 'a b&c';
        const decode = p.get('decode') ?? 'bytes';
        return json(200, {
          operator: p.get('operator'),
          state: p.get('state'),
          key: p.get('key'),
          found,
          kind: found ? 'value' : null,
          encoding: decode,
          value: found ? (decode === 'i64' || decode === 'declared' ? 4800 : decode === 'bytes' ? '804b' : { undecodable: '804b' }) : null,
          entries: null,
          subtask: 1,
          as_of: 'the last batch the owning subtask finished (not necessarily checkpointed)',
        });
      }
      case 'GET /v1/pipelines/orders/tail': {
        if (url.searchParams.get('output') !== 'main') return error(404, 'not_found', 'no such output');
        res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
        let i = 0;
        const send = () => {
          for (let n = 0; n < 30 && i < 150; n++, i++) {
            res.write(`data: ${JSON.stringify({ timestamp: 1_768_471_200_000 + i, key: String(i % 3), value: `{"order_id":${i}}` })}\n\n`);
          }
        };
        send();
        const timer = setInterval(send, 50);
        timers.add(timer);
        res.on('close', () => {
          clearInterval(timer);
          timers.delete(timer);
        });
        return;
      }
      case 'GET /v1/pipelines/fleet':
      case 'GET /v1/pipelines/fleet-stopped':
        return json(200, { ...clusterStatus(now, url.pathname.endsWith('-stopped')), name: url.pathname.split('/').at(-1) });
      case 'GET /v1/pipelines/fleet/checkpoints':
      case 'GET /v1/pipelines/fleet-stopped/checkpoints':
        return error(501, 'not_on_cluster', "listing checkpoints (a cluster pipeline's are per unit: see each unit's last_checkpoint in its status) is not supported on a cluster's server yet");
      case 'POST /v1/pipelines/fleet/stop':
        return json(200, { state: 'stopped', location: null });
      case 'GET /v1/functions':
        return json(200, {
          functions: [
            { name: 'revenue', versions: [{ name: 'revenue', version: 1, digest: 'ab'.repeat(32), worlds: ['weir:function/key-function@0.2.0', 'weir:function/process-function@0.2.0'], size: 123456, uploaded_at: now - 100_000 }] },
          ],
        });
      case 'PUT /v1/functions/fresh':
        return json(201, { name: 'fresh', version: 1, digest: 'cd'.repeat(32), worlds: ['weir:function/key-function@0.2.0'], size: body.length, uploaded_at: now });
      default:
        return error(404, 'not_found', `no route ${route}`);
    }
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address();
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    close: () =>
      new Promise((r) => {
        timers.forEach(clearInterval);
        server.closeAllConnections();
        server.close(r);
      }),
  };
}
