// The console in a real browser against the real `weir serve`: a wrong
// token is refused and the right one signs in; a function is uploaded and
// a pipeline deployed from the console; it runs and its rate rises above
// zero; a savepoint shows in the checkpoint history; a state lookup shows
// a customer's running total, which must be one the generator's orders
// give; the tail shows output records; the pipeline is stopped.
// Screenshots go to $WEIR_ARTIFACTS (default console/test-artifacts/).
//
//   WEIR_BIN=…/weir [WEIR_FUNCTIONS_DIR=target/functions] npm test
//
// Skipped, saying why, without $WEIR_BIN, revenue.wasm or Chromium.
// With WEIR_CONSOLE_FROM_DIST=1 the page is served from console/dist by
// the test itself, the API proxied to weir on the same origin — for a
// weir that does not serve /console/ itself.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';

import { orderReaching, orders } from './generator.mjs';
import { browserMissing, eventually, openBrowser, screenshot, startListening, startProxy, unexpected } from './support.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const WEIR = process.env.WEIR_BIN;
const FUNCTIONS = resolve(process.env.WEIR_FUNCTIONS_DIR ?? join(here, '..', '..', 'target', 'functions'));
const REVENUE = join(FUNCTIONS, 'revenue.wasm');
const FROM_DIST = process.env.WEIR_CONSOLE_FROM_DIST === '1';

function whyNot() {
  if (!WEIR) return 'WEIR_BIN is not set (the weir binary to test, e.g. target/debug/weir)';
  if (!existsSync(WEIR)) return `WEIR_BIN=${WEIR} does not exist`;
  if (!existsSync(REVENUE)) return `no ${REVENUE} (scripts/dev build-functions, or set WEIR_FUNCTIONS_DIR)`;
  return browserMissing();
}
const skip = whyNot();
if (skip) console.log(`skipping the browser test against weir serve: ${skip}`);

const TOKEN = randomBytes(24).toString('hex');
const KEYS = 10;
// Event time starts now, so the watermark lag is one a reader expects.
const START = new Date(Date.now() - 60_000).toISOString().replace(/\.\d+Z$/, 'Z');
const SPEC = `name: console-demo
parallelism: 2
batch_size: 256
source: { type: generator, count: 1000000000, keys: ${KEYS}, interval_ms: 1, start_time: ${START} }
key: { function: revenue }
process: { function: revenue }
sink: { type: discard }
checkpoint: { interval: 2s }
watermark: { max_out_of_orderness: 5s }
`;

let dir;
let weir;
let base;
let proxy;
let session;

/** Start `weir serve` on a free port; resolves to its process and base URL. */
function startWeir(dataDir) {
  const args = ['serve', '--listen', '127.0.0.1:0', '--data-dir', dataDir, '--token', TOKEN];
  return startListening(WEIR, args, {
    env: { WEIR_API_TOKEN: '' },
    listening: /listening on (http:\/\/\S+)/,
    what: 'weir serve',
    timeout: 60_000,
  });
}

/** The API, called from the test (not the browser). */
async function api(method, path, body, type) {
  const response = await fetch(`${base}${path}`, {
    method,
    headers: { Authorization: `Bearer ${TOKEN}`, ...(type ? { 'Content-Type': type } : {}) },
    body,
  });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : null };
}

before(async () => {
  if (skip) return;
  dir = await mkdtemp(join(tmpdir(), 'weir-console-'));
  const started = await startWeir(join(dir, 'data'));
  weir = started.child;
  base = started.url;
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
  if (weir && weir.exitCode === null) {
    const exited = new Promise((r) => weir.once('exit', r));
    weir.kill('SIGKILL');
    await exited;
  }
  if (dir) await rm(dir, { recursive: true, force: true });
});

test('the console drives a real weir serve', { skip: skip ?? false, timeout: 600_000 }, async (t) => {
  const { page, errors } = session;
  const row = () => page.locator('tr[data-pipeline="console-demo"]');
  // Later steps need earlier ones; they are skipped, not timed out, after a failure.
  const done = new Set();
  const needs = (...steps) => {
    const missing = steps.filter((step) => !done.has(step));
    return missing.length > 0 ? `needs: ${missing.join(', ')}` : false;
  };
  const rateOf = (text) => {
    const m = text.match(/^([\d.]+)([kMG]?)\/s$/);
    return m ? Number(m[1]) * { '': 1, k: 1e3, M: 1e6, G: 1e9 }[m[2]] : null;
  };

  await t.test('the generator orders this test expects are the ones weir generates', async () => {
    const spec = join(dir, 'check.yaml');
    await writeFile(
      spec,
      `name: check\nsource: { type: generator, count: 30, keys: ${KEYS} }\nkey: { wasm: ${JSON.stringify(REVENUE)} }\n` +
        `process: { wasm: ${JSON.stringify(REVENUE)} }\nsink: { type: stdout }\n`,
    );
    const run = spawnSync(WEIR, ['run', spec, '--data-dir', join(dir, 'run'), '--fresh', '--quiet'], { encoding: 'utf8', timeout: 120_000 });
    assert.equal(run.status, 0, run.stderr);
    const printed = run.stdout.trim().split('\n').map((l) => JSON.parse(l)).sort((a, b) => a.order_id - b.order_id);
    const expected = [];
    for (const o of orders({ keys: KEYS })) {
      if (o.id > 30) break;
      expected.push({ order_id: o.id, customer_id: o.customer, cents: o.cents });
    }
    assert.deepEqual(
      printed.map((p) => ({ order_id: p.order_id, customer_id: p.customer_id, cents: Math.round(p.amount * 100) })),
      expected,
    );
  });

  await t.test('weir serves the console: / and /console redirect to /console/', async () => {
    if (FROM_DIST) return t.diagnostic?.('served from console/dist (WEIR_CONSOLE_FROM_DIST=1)');
    for (const path of ['/', '/console']) {
      const answer = await fetch(`${base}${path}`, { redirect: 'manual' });
      assert.ok([301, 302, 303, 307, 308].includes(answer.status), `${path}: ${answer.status}`);
      assert.match(answer.headers.get('location') ?? '', /\/console\/$/);
    }
    const page = await fetch(`${base}/console/`);
    assert.equal(page.status, 200, 'GET /console/ needs no token');
    assert.match(page.headers.get('content-type'), /^text\/html/);
    assert.match(page.headers.get('content-security-policy') ?? '', /^default-src 'self'/);
    const js = await fetch(`${base}/console/console.js`);
    assert.match(js.headers.get('content-type'), /javascript/);
  });

  await t.test('a wrong token is refused; the right one signs in', async () => {
    await page.goto(`${base}/console/`);
    await page.getByLabel('API token').fill('not-the-token');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('alert').filter({ hasText: 'refused this token' }).waitFor();
    await screenshot(page, 'console-login');
    await page.getByLabel('API token').fill(TOKEN);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Pipelines' }).waitFor();
    assert.equal(await page.evaluate(() => sessionStorage.getItem('weir.console.token')), TOKEN);
    assert.ok(!page.url().includes(TOKEN), 'the token is never in the URL');
    done.add('signed in');
  });

  await t.test('a function is uploaded from the console', { skip: needs('signed in') }, async () => {
    await page.getByRole('navigation').getByRole('link', { name: 'Functions' }).click();
    await page.getByLabel('Name').fill('revenue');
    await page.getByLabel('Component or module').setInputFiles(REVENUE);
    await page.getByRole('button', { name: 'Upload' }).click();
    const stored = page.getByText(/Stored revenue version 1/);
    await stored.or(page.getByRole('alert')).waitFor({ timeout: 120_000 });
    assert.ok(await stored.isVisible(), await page.getByRole('alert').allInnerTexts().then(String));
    await page.locator('tr[data-function="revenue"][data-version="1"]').waitFor();
    await screenshot(page, 'console-functions');
    done.add('uploaded');
  });

  await t.test('a pipeline is deployed from the console, runs, and its rate rises above zero', { skip: needs('uploaded') }, async () => {
    await page.getByRole('navigation').getByRole('link', { name: 'Pipelines' }).click();
    await page.getByRole('button', { name: 'Deploy' }).click();
    const dialog = page.getByRole('dialog', { name: 'Deploy a pipeline' });
    await dialog.getByLabel(/Spec/).fill(SPEC);
    await dialog.getByRole('button', { name: 'Deploy' }).click();
    const deployed = page.getByText('Deployed console-demo.');
    await deployed.or(dialog.getByRole('alert')).waitFor({ timeout: 120_000 });
    assert.ok(await deployed.isVisible(), await dialog.getByRole('alert').allInnerTexts().then(String));
    await eventually(async () => /running/.test(await row().innerText()), { what: 'running' });
    await eventually(async () => rateOf(await row().locator('[data-field="in-rate"]').innerText()) > 0, {
      timeout: 60_000,
      what: 'a records-in rate above zero in the list',
    });
    await eventually(async () => /checkpoint \d+, /.test(await row().innerText()), { timeout: 30_000, what: 'a last checkpoint in the list' });
    await screenshot(page, 'console-pipelines');
    done.add('deployed');
  });

  await t.test('the pipeline page: graph with one box per subtask, charts, functions', { skip: needs('deployed') }, async () => {
    await page.getByRole('link', { name: 'console-demo' }).click();
    await page.locator('g[data-operator="process"]').waitFor();
    await eventually(async () => (await page.locator('g[data-operator="process"] g.subtask').count()) === 2, { what: 'two subtasks' });
    await eventually(async () => rateOf(await page.locator('[data-field="in-rate"]').innerText()) > 0, { what: 'a rate on the page' });
    assert.equal(await page.locator('.uplot').count(), 2);
    assert.match(await page.locator('table[aria-label="Function versions"]').innerText(), /revenue\s+1/);
    done.add('page');
  });

  await t.test('a savepoint shows in the checkpoint history', { skip: needs('page') }, async () => {
    await page.getByRole('button', { name: 'Savepoint' }).click();
    await page.getByRole('dialog', { name: 'Take a savepoint' }).getByRole('button', { name: 'Take savepoint' }).click();
    await page.getByText(/Savepoint taken: /).waitFor({ timeout: 120_000 });
    await page.locator('table[aria-label="Checkpoint history"] tr[data-kind="savepoint"]').waitFor();
    const { body } = await api('GET', '/v1/pipelines/console-demo/checkpoints');
    assert.ok(body.checkpoints.some((c) => c.kind === 'savepoint'), JSON.stringify(body));
    // Let the charts gather some samples for the screenshot.
    await page.waitForTimeout(15_000);
    await screenshot(page, 'console-pipeline', { fullPage: true });
  });

  // Needs the per-subtask metrics in the status (`metrics`).
  await t.test('[metrics] subtasks are coloured by load and the watermark lag is shown', { skip: needs('page') }, async () => {
    await eventually(
      async () => {
        const pressures = await page.locator('g[data-operator="process"] g.subtask').evaluateAll((gs) => gs.map((g) => g.dataset.pressure));
        return pressures.length === 2 && pressures.every((p) => ['ok', 'busy', 'backpressured'].includes(p));
      },
      { timeout: 15_000, what: 'subtasks with a known load (status.metrics)' },
    );
    await eventually(async () => (await page.locator('[data-field="lag"]').innerText()) !== '—', { timeout: 10_000, what: 'a watermark lag' });
    const wanted = ['source → key', 'key → process', 'process → main'];
    await eventually(
      async () => {
        const edges = await page.locator('svg.graph path.edge title').allTextContents();
        return wanted.every((edge) => edges.includes(edge));
      },
      { timeout: 10_000, what: `the edges ${wanted.join(', ')}` },
    );
    assert.match(await page.locator('[data-field="checkpoints-completed"]').innerText(), /^[1-9]/);
    assert.notEqual(await page.locator('[data-field="checkpoint-duration"]').innerText(), '—');
  });

  // Needs GET /v1/pipelines/{name}/state.
  await t.test('[state] a state lookup shows a running total the generator gives', { skip: needs('page') }, async () => {
    await page.waitForTimeout(1000);
    await page.getByLabel('Operator', { exact: true }).fill('process');
    await page.getByLabel('State', { exact: true }).fill('total');
    await page.getByLabel('Key', { exact: true }).fill('3');
    await page.getByRole('button', { name: 'Look up' }).click();
    const answer = page.locator('.state-answer');
    const refusal = page.locator('form.lookup ~ .error');
    await answer.or(refusal).waitFor({ timeout: 15_000 });
    assert.ok(await answer.isVisible(), `the lookup was refused: ${await refusal.allInnerTexts()}`);
    const read = (await api('GET', '/v1/pipelines/console-demo')).body.counts.source_records;
    // revenue declares its total an i64: the server shows the number.
    const total = Number(await answer.locator('[data-field="value"]').innerText());
    assert.ok(total > 0, `a total: ${await answer.innerText()}`);
    const at = orderReaching(total, 3, { keys: KEYS, maxId: read });
    assert.ok(at !== null, `${total} cents is no running total of customer 3 within the first ${read} orders`);
    assert.match(await answer.innerText(), /As of /);
    await screenshot(answer, 'console-state');
  });

  // Needs GET /v1/pipelines/{name}/tail.
  await t.test('[tail] the tail shows the output records live, and stops', { skip: needs('page') }, async () => {
    await page.getByRole('button', { name: 'Tail', exact: true }).click();
    const lines = page.locator('.tail-line');
    const refusal = page.locator('.tail .error');
    await eventually(async () => (await lines.count()) >= 10 || (await refusal.count()) > 0, { timeout: 15_000, what: 'tail lines' });
    assert.equal(await refusal.count(), 0, `the tail was refused: ${await refusal.allInnerTexts()}`);
    assert.match(await lines.last().innerText(), /"total":/);
    assert.ok((await lines.count()) <= 100);
    await screenshot(page.locator('.tail'), 'console-tail');
    await page.getByRole('button', { name: 'Stop tail' }).click();
    await page.getByText('stopped', { exact: true }).waitFor();
  });

  await t.test('the pipeline is stopped with a savepoint from the console', { skip: needs('page') }, async () => {
    await page.getByRole('button', { name: 'Stop', exact: true }).click();
    await page.getByRole('dialog', { name: 'Stop the pipeline' }).getByRole('button', { name: 'Stop with savepoint' }).click();
    await page.getByText(/Stopped; final snapshot/).waitFor({ timeout: 120_000 });
    await eventually(async () => (await page.locator('.title-row .badge').innerText()) === 'stopped', { what: 'stopped' });
    const { body } = await api('GET', '/v1/pipelines/console-demo');
    assert.equal(body.state, 'stopped');
    await eventually(
      async () => (await page.locator('table[aria-label="Checkpoint history"] tr[data-kind="savepoint"]').count()) >= 2,
      { what: 'two savepoints', timeout: 15_000 },
    );
  });

  assert.deepEqual(unexpected(errors), [], 'no page errors or CSP violations');
  if (weir.exitCode !== null) assert.fail(`weir serve died:\n${weir.stderrTail()}`);
});
