// The console in a real browser against a real cluster: two `weir worker
// --cluster` workers and one `weir serve --cluster` on a Kafka broker and
// an S3 server. A function is uploaded and a Kafka-to-Kafka pipeline
// deployed from the console; every unit shows running on one of the two
// workers (both appear) and the list says how many units run on how many
// workers; while orders are produced the rates rise above zero and the
// counts rise; a state lookup of a customer shows exactly the total of the
// orders produced for it, and which unit and worker answered; the tail
// shows committed results; what a cluster's server does not serve
// (savepoints, checkpoint history) is not offered; the pipeline is stopped
// from the console. Screenshots go
// to $WEIR_ARTIFACTS (default console/test-artifacts/).
//
//   WEIR_BIN=…/weir WEIR_FUNCTIONS_DIR=target/functions \
//   WEIR_TEST_KAFKA_BOOTSTRAP=127.0.0.1:9092 WEIR_TEST_S3_ENDPOINT=http://127.0.0.1:PORT \
//   node --test test/cluster.test.mjs
//
// `scripts/dev test` sets the last two (the services it starts or finds)
// for every suite. Skipped, saying why, without any of them or Chromium.
// The S3 server is used as tests/integration/support/s3.rs does: a bucket
// made with a plain PUT, the `weir` processes given its test credentials.
// With WEIR_CONSOLE_FROM_DIST=1 the page is served from console/dist (see
// browser.test.mjs).

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';

import {
  browserMissing,
  eventually,
  openBrowser,
  screenshot,
  startListening,
  startProxy,
  stopProcess,
  unexpected,
} from './support.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const WEIR = process.env.WEIR_BIN;
const FUNCTIONS = resolve(process.env.WEIR_FUNCTIONS_DIR ?? join(here, '..', '..', 'target', 'functions'));
const REVENUE = join(FUNCTIONS, 'revenue.wasm');
const FROM_DIST = process.env.WEIR_CONSOLE_FROM_DIST === '1';
const KAFKA = process.env.WEIR_TEST_KAFKA_BOOTSTRAP?.trim();
const S3 = process.env.WEIR_TEST_S3_ENDPOINT?.trim().replace(/\/+$/, '');

function whyNot() {
  if (!WEIR) return 'WEIR_BIN is not set (the weir binary to test, e.g. target/debug/weir)';
  if (!existsSync(WEIR)) return `WEIR_BIN=${WEIR} does not exist`;
  if (!existsSync(REVENUE)) return `no ${REVENUE} (scripts/dev build-functions, or set WEIR_FUNCTIONS_DIR)`;
  if (!KAFKA) return 'WEIR_TEST_KAFKA_BOOTSTRAP is not set (a Kafka broker: scripts/dev kafka start)';
  if (!S3) return 'WEIR_TEST_S3_ENDPOINT is not set (an S3 server: scripts/dev s3 start)';
  return browserMissing();
}
const skip = whyNot();
if (skip) console.log(`skipping the browser test against a cluster: ${skip}`);

// The credentials the S3 test server takes (moto accepts any), as
// tests/integration/support/s3.rs gives them to `weir`.
const S3_ENV = {
  AWS_ENDPOINT: S3,
  AWS_ALLOW_HTTP: 'true',
  AWS_ACCESS_KEY_ID: 'weir-test',
  AWS_SECRET_ACCESS_KEY: 'weir-test-secret',
  AWS_REGION: 'us-east-1',
};
const TOKEN = randomBytes(24).toString('hex');
const CLUSTER_TOKEN = randomBytes(24).toString('hex');
const SUFFIX = `${process.pid}-${Date.now().toString(36)}`;
const BUCKET = `weir-console-${SUFFIX}`;
const CLUSTER = `console-${SUFFIX}`;
const NAME = `orders-${SUFFIX}`;
const INPUT = `console-orders-${SUFFIX}`;
const OUTPUT = `console-revenue-${SUFFIX}`;
const PARTITIONS = 2;
const PARALLELISM = 2;
const WORKERS = ['w1', 'w2'];
const CUSTOMERS = 7;
/** The units the pipeline is cut into: one ingest unit per input partition, one task per keyed subtask. */
const UNITS = [
  ...Array.from({ length: PARTITIONS }, (_, i) => `${NAME}-source-${i}`),
  ...Array.from({ length: PARALLELISM }, (_, i) => `${NAME}-keyed-${i}`),
].sort();

const SPEC = `name: ${NAME}
parallelism: ${PARALLELISM}
checkpoint: { interval: 1s, timeout: 1m, storage: "s3://${BUCKET}/${NAME}" }
source: { type: kafka, bootstrap_servers: "${KAFKA}", topics: [${INPUT}], start: earliest, timestamp_field: event_time }
key: { function: revenue }
process: { function: revenue }
sink: { type: kafka, bootstrap_servers: "${KAFKA}", topic: ${OUTPUT}, delivery: exactly-once, transactional_id_prefix: ${NAME}, transaction_timeout: 5m }
`;

/** Order `id`: its customer and amount in cents, the same every run. */
function order(id) {
  const cents = 100 + ((id * 7919) % 4900);
  const at = new Date(Date.UTC(2026, 0, 1) + id * 1000).toISOString().replace(/\.\d+Z$/, 'Z');
  return {
    order_id: id,
    customer_id: id % CUSTOMERS,
    amount: `${Math.floor(cents / 100)}.${String(cents % 100).padStart(2, '0')}`,
    event_time: at,
    cents,
  };
}

let dir;
let server;
const workers = [];
let base;
let proxy;
let session;
/** Orders written to the input topic so far (ids 1..produced). */
let produced = 0;

/** Run `weir args` to its end; rejects with its stderr when it fails. */
function weir(args, env = {}) {
  return new Promise((resolveRun, reject) => {
    const child = spawn(WEIR, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (d) => (output += d));
    child.stderr.on('data', (d) => (output += d));
    child.on('error', reject);
    child.on('exit', (code) => (code === 0 ? resolveRun(output) : reject(new Error(`weir ${args.join(' ')} (${code}):\n${output}`))));
  });
}

/** Write the next `count` orders to the input topic, keyed by customer. */
async function produce(count) {
  const lines = [];
  for (let id = produced + 1; id <= produced + count; id++) {
    const { cents, ...o } = order(id);
    lines.push(JSON.stringify(o));
  }
  const file = join(dir, `orders-${produced + 1}.jsonl`);
  await writeFile(file, lines.join('\n') + '\n');
  await weir(['kafka', 'produce', '-b', KAFKA, '-k', 'customer_id', INPUT, file]);
  produced += count;
}

/** The API, called from the test (not the browser). */
async function api(method, path) {
  const response = await fetch(`${base}${path}`, { method, headers: { Authorization: `Bearer ${TOKEN}` } });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : null };
}

before(async () => {
  if (skip) return;
  dir = await mkdtemp(join(tmpdir(), 'weir-console-cluster-'));
  // A bucket of its own, made as the integration tests make theirs.
  const made = await fetch(`${S3}/${BUCKET}`, { method: 'PUT' });
  assert.ok(made.ok, `creating bucket ${BUCKET} at ${S3}: ${made.status} ${await made.text()}`);
  await weir(['kafka', 'topic', 'create', '-b', KAFKA, '-p', String(PARTITIONS), INPUT]);
  await weir(['kafka', 'topic', 'create', '-b', KAFKA, OUTPUT]);
  const cluster = ['--cluster', CLUSTER, '--bootstrap-servers', KAFKA, '--storage', `s3://${BUCKET}/cluster`, '--cluster-token', CLUSTER_TOKEN];
  const env = { ...S3_ENV, WEIR_API_TOKEN: '', WEIR_DATA_DIR: '', WEIR_CLUSTER_TOKEN: '' };
  for (const id of WORKERS) {
    const args = ['worker', ...cluster, '--listen', '127.0.0.1:0', '--worker-id', id, '--data-dir', join(dir, id)];
    const started = await startListening(WEIR, args, {
      env,
      listening: new RegExp(`weir worker ${id} listening on (http://\\S+)`),
      what: `weir worker ${id}`,
    });
    workers.push({ id, ...started });
  }
  const serve = ['serve', ...cluster, '--listen', '127.0.0.1:0', '--data-dir', join(dir, 'serve'), '--token', TOKEN, '--allow-storage', `s3://${BUCKET}/`];
  server = await startListening(WEIR, serve, { env, listening: /listening on (http:\/\/\S+)/, what: 'weir serve --cluster' });
  base = server.url;
  if (FROM_DIST) {
    proxy = await startProxy(base);
    base = proxy.url;
  }
  session = await openBrowser();
});

after(async () => {
  await session?.browser.close();
  proxy?.server.closeAllConnections();
  proxy?.server.close();
  await Promise.all([server?.child, ...workers.map((w) => w.child)].map((child) => stopProcess(child)));
  if (dir) await rm(dir, { recursive: true, force: true });
});

test('the console shows a pipeline running on a cluster', { skip: skip ?? false, timeout: 900_000 }, async (t) => {
  const { page, errors } = session;
  const row = () => page.locator(`tr[data-pipeline="${NAME}"]`);
  const done = new Set();
  const needs = (...steps) => {
    const missing = steps.filter((step) => !done.has(step));
    return missing.length > 0 ? `needs: ${missing.join(', ')}` : false;
  };
  const rateOf = (text) => {
    const m = text.match(/^([\d.]+)([kMG]?)\/s$/);
    return m ? Number(m[1]) * { '': 1, k: 1e3, M: 1e6, G: 1e9 }[m[2]] : null;
  };
  const count = (text) => Number(text.replace(/,/g, ''));
  const dead = () => [server, ...workers].find((p) => p.child.exitCode !== null);

  await t.test('both workers are ready', async () => {
    for (const w of workers) {
      await eventually(async () => (await fetch(`${w.url}/readyz`)).status === 200, {
        timeout: 120_000,
        what: `worker ${w.id}'s /readyz`,
      });
    }
  });

  await t.test('sign in and upload revenue from the console', async () => {
    await page.goto(`${base}/console/`);
    await page.getByLabel('API token').fill(TOKEN);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Pipelines' }).waitFor();
    await page.getByRole('navigation').getByRole('link', { name: 'Functions' }).click();
    await page.getByLabel('Name').fill('revenue');
    await page.getByLabel('Component or module').setInputFiles(REVENUE);
    await page.getByRole('button', { name: 'Upload' }).click();
    const stored = page.getByText(/Stored revenue version 1/);
    await stored.or(page.getByRole('alert')).waitFor({ timeout: 120_000 });
    assert.ok(await stored.isVisible(), await page.getByRole('alert').allInnerTexts().then(String));
    done.add('uploaded');
  });

  await t.test('a Kafka pipeline deployed from the console runs its units on both workers', { skip: needs('uploaded') }, async () => {
    await page.getByRole('navigation').getByRole('link', { name: 'Pipelines' }).click();
    await page.getByRole('button', { name: 'Deploy' }).click();
    const dialog = page.getByRole('dialog', { name: 'Deploy a pipeline' });
    await dialog.getByLabel(/Spec/).fill(SPEC);
    await dialog.getByRole('button', { name: 'Deploy' }).click();
    const deployed = page.getByText(`Deployed ${NAME}.`);
    await deployed.or(dialog.getByRole('alert')).waitFor({ timeout: 120_000 });
    assert.ok(await deployed.isVisible(), await dialog.getByRole('alert').allInnerTexts().then(String));
    await eventually(
      async () => (await row().locator('[data-field="placement"]').innerText()) === `${UNITS.length} units on ${WORKERS.length} workers`,
      { timeout: 180_000, what: `"${UNITS.length} units on ${WORKERS.length} workers" in the list` },
    );
    await screenshot(page, 'cluster-pipelines');

    await row().getByRole('link', { name: NAME }).click();
    const units = page.locator('section.worker .unit');
    await eventually(
      async () => {
        const shown = await units.evaluateAll((els) =>
          els.map((el) => ({ unit: el.dataset.unit, state: el.dataset.state, worker: el.closest('section.worker').dataset.worker })),
        );
        const names = shown.map((u) => u.unit).sort();
        return (
          JSON.stringify(names) === JSON.stringify(UNITS) &&
          shown.every((u) => u.state === 'running' && WORKERS.includes(u.worker)) &&
          new Set(shown.map((u) => u.worker)).size === WORKERS.length
        );
      },
      { timeout: 180_000, what: `every unit running, once, on one of ${WORKERS.join(', ')}, both used` },
    );
    // The units table says the same as the workers' boxes.
    const rows = await page.locator('table[aria-label="Units"] tbody tr').evaluateAll((trs) =>
      trs.map((tr) => [tr.dataset.unit, tr.dataset.worker]),
    );
    assert.deepEqual(rows.map(([unit]) => unit), UNITS);
    for (const [unit, worker] of rows) {
      const box = page.locator(`section.worker[data-worker="${worker}"] .unit[data-unit="${unit}"]`);
      assert.equal(await box.count(), 1, `${unit} is in ${worker}'s box`);
    }
    assert.match(await page.locator('[data-field="placement"]').innerText(), /^4 units on 2 workers$/);
    done.add('running');
  });

  await t.test('what a cluster server does not serve is not offered; its output can be tailed', { skip: needs('running') }, async () => {
    assert.equal(await page.getByRole('button', { name: 'Savepoint' }).isDisabled(), false, 'a cluster takes savepoints');
    assert.equal(await page.locator('table[aria-label="Checkpoint history"]').count(), 0);
    await page.locator('[data-field="checkpoints-note"]').waitFor();
    // The server lists each unit's checkpoints; the page shows each unit's last in the units table.
    assert.equal((await api('GET', `/v1/pipelines/${NAME}/checkpoints`)).status, 200);
  });

  await t.test('while orders come in, the rates rise above zero and the counts rise', { skip: needs('running') }, async () => {
    const readWritten = async () => {
      const text = await page.locator('dl.stats div', { hasText: 'Read / written' }).locator('dd').innerText();
      const [read, written] = text.split('/').map((s) => count(s.trim()));
      return { read, written };
    };
    // Orders keep coming (20 every half second) until the page has shown it all.
    let producing = true;
    const producer = (async () => {
      while (producing) {
        await produce(20);
        await new Promise((r) => setTimeout(r, 500));
      }
    })();
    try {
      await eventually(async () => rateOf(await page.locator('[data-field="in-rate"]').innerText()) > 0, {
        timeout: 120_000,
        what: 'a records-in rate above zero on the page',
      });
      await eventually(async () => rateOf(await page.locator('[data-field="out-rate"]').innerText()) > 0, {
        timeout: 60_000,
        what: 'a records-out rate above zero on the page',
      });
      const first = await eventually(async () => {
        const n = await readWritten();
        return n.read > 0 && n.written > 0 ? n : null;
      }, { what: 'records read and written' });
      await eventually(async () => {
        const n = await readWritten();
        return n.read > first.read && n.written > first.written;
      }, { timeout: 60_000, what: `the counts rising past ${first.read} / ${first.written}` });
      // Every task unit's box shows it writing.
      await eventually(
        async () => {
          const outs = await page.locator(`.unit[data-unit*="-keyed-"] [data-field="records-out"]`).allInnerTexts();
          return outs.length === PARALLELISM && outs.every((o) => o !== '—' && Number(o.replace(/[kMG]$/, '')) > 0);
        },
        { what: 'every task unit writing' },
      );
      // The tail: committed results, whichever unit wrote them.
      await page.getByRole('button', { name: 'Tail', exact: true }).click();
      await eventually(async () => /"total":/.test(await page.locator('.tail-line').last().innerText().catch(() => '')), {
        timeout: 60_000,
        what: 'a result in the tail',
      });
      await page.getByRole('button', { name: 'Stop tail' }).click();
      await screenshot(page, 'cluster-pipeline', { fullPage: true });
      await screenshot(page.locator('.workers'), 'cluster-workers');
    } finally {
      producing = false;
      await producer;
    }
    done.add('flowing');
  });

  await t.test('a state lookup shows the total of the orders produced for a customer', { skip: needs('flowing') }, async () => {
    const customer = 3;
    let expected = 0;
    for (let id = 1; id <= produced; id++) if (order(id).customer_id === customer) expected += order(id).cents;
    assert.ok(expected > 0);
    await page.getByLabel('State', { exact: true }).fill('total');
    await page.getByLabel('Key', { exact: true }).fill(String(customer));
    const answer = page.locator('.state-answer');
    // Looked up again until the owning unit has processed every order
    // (the lookup answers as of the last batch it finished).
    await eventually(
      async () => {
        await page.getByRole('button', { name: 'Look up' }).click();
        await page.waitForFunction(() => !document.querySelector('form.lookup button[type="submit"]').disabled);
        if ((await answer.count()) === 0) throw new Error(`refused: ${await page.locator('form.lookup ~ .error').allInnerTexts()}`);
        const shown = await answer.locator('[data-field="value"]').innerText();
        if (Number(shown) !== expected) throw new Error(`shown: ${shown}`);
        return true;
      },
      { timeout: 120_000, interval: 1000, what: `customer ${customer}'s total to be ${expected} cents` },
    );
    const owner = await answer.locator('[data-field="owner"]').innerText();
    const match = owner.match(/From unit (\S+) on worker (\S+), which owns the key/);
    assert.ok(match, owner);
    assert.ok(UNITS.includes(match[1]) && match[1].includes('-keyed-'), owner);
    assert.ok(WORKERS.includes(match[2]), owner);
    await screenshot(answer, 'cluster-state');
  });

  await t.test('the pipeline is stopped with a savepoint from the console', { skip: needs('running') }, async () => {
    await page.getByRole('button', { name: 'Stop', exact: true }).click();
    await page.getByRole('dialog', { name: 'Stop the pipeline' }).getByRole('button', { name: 'Stop with savepoint' }).click();
    // The units drain, and the server puts their savepoints together.
    await page.getByText(/Stopped; final snapshot: .*\/savepoints\/sp-\d+/).waitFor({ timeout: 150_000 });
    await eventually(async () => (await page.locator('.title-row .badge').innerText()) === 'stopped', { what: 'stopped' });
    assert.equal((await api('GET', `/v1/pipelines/${NAME}`)).body.state, 'stopped');
  });

  assert.deepEqual(unexpected(errors), [], 'no page errors or CSP violations');
  const gone = dead();
  if (gone) assert.fail(`a cluster process died:\n${gone.child.stderrTail()}`);
});
