// The console in a real browser against a stub API (stub-server.mjs):
// login, the graph's colours, charts, dialogs and what they send, the
// state lookup's readings, the tail, uploads — including the fields only
// newer servers report, and with the CSP weir sends (a violation fails).
// Needs Chromium; skipped with the reason when it is missing.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { startStub } from './stub-server.mjs';
import { browserMissing, eventually, openBrowser, screenshot, unexpected } from './support.mjs';

const missing = browserMissing();
if (missing) console.log(`skipping the UI test: ${missing}`);

const TOKEN = 'stub-token';
let stub;
let session;

before(async () => {
  if (missing) return;
  stub = await startStub({ token: TOKEN });
  session = await openBrowser();
});

after(async () => {
  await session?.browser.close();
  await stub?.close();
});

test('the console against a stub API', { skip: missing ?? false }, async (t) => {
  const { page, errors } = session;
  const sent = (method, path) => stub.requests.filter((r) => r.method === method && r.path === path);

  await t.test('login refuses a wrong token, then signs in', async () => {
    await page.goto(`${stub.url}/console/`);
    await page.getByLabel('API token').fill('wrong');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('alert').filter({ hasText: 'refused this token' }).waitFor();
    await page.getByLabel('API token').fill(TOKEN);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Pipelines' }).waitFor();
    assert.equal(await page.evaluate(() => sessionStorage.getItem('weir.console.token')), TOKEN);
    assert.equal(await page.evaluate(() => localStorage.length), 0);
    assert.equal(await page.evaluate(() => document.cookie), '');
  });

  await t.test('the list shows rates, lag and the last checkpoint', async () => {
    const row = page.locator('tr[data-pipeline="orders"]');
    await eventually(async () => /k\/s/.test(await row.locator('[data-field="in-rate"]').innerText()), { what: 'a rate' });
    const text = await row.innerText();
    assert.match(text, /running/);
    assert.match(text, /4\.2 s/);
    assert.match(text, /checkpoint 2, \d+(\.\d)? s ago/);
  });

  await t.test('deploy posts YAML and shows the server error', async () => {
    await page.getByRole('button', { name: 'Deploy' }).click();
    const dialog = page.getByRole('dialog', { name: 'Deploy a pipeline' });
    await dialog.getByLabel(/Spec/).fill('source: {}\n');
    await dialog.getByRole('button', { name: 'Deploy' }).click();
    await dialog.getByRole('alert').filter({ hasText: 'name: missing field' }).waitFor();
    await dialog.getByLabel(/Spec/).fill('name: other\nsource: { type: generator, count: 10 }\n');
    await dialog.getByRole('button', { name: 'Deploy' }).click();
    await page.getByText('Deployed other.').waitFor();
    const posted = sent('POST', '/v1/pipelines').at(-1);
    assert.equal(posted.type, 'application/yaml');
    assert.equal(posted.body.toString(), 'name: other\nsource: { type: generator, count: 10 }\n');
  });

  await t.test('the pipeline page draws the graph coloured by load', async () => {
    await page.getByRole('link', { name: 'orders' }).click();
    await page.getByRole('heading', { name: /orders/ }).waitFor();
    const process = page.locator('g[data-operator="process"] g.subtask');
    await eventually(async () => (await process.count()) === 2, { what: 'two subtasks' });
    assert.deepEqual(
      await process.evaluateAll((gs) => gs.map((g) => g.getAttribute('data-pressure'))),
      ['busy', 'backpressured'],
    );
    assert.equal(await page.locator('g[data-operator="source"] g.subtask').getAttribute('data-pressure'), 'ok');
    assert.equal(await page.locator('g[data-operator="late"]').count(), 1);
    assert.equal(await page.locator('svg.graph path.edge').count(), 4);
    const fill = await page.locator('g[data-operator="process"] g.subtask[data-pressure="backpressured"] rect').evaluate((r) => getComputedStyle(r).fill);
    assert.equal(fill, 'rgb(217, 52, 43)');
    assert.match(await page.locator('g[data-operator="process"]').textContent(), /750\/s/);
    await eventually(async () => (await page.locator('.uplot').count()) === 2, { what: 'two charts' });
    await page.waitForTimeout(2500);
    await screenshot(page, 'stub-pipeline', { fullPage: true });
  });

  await t.test('savepoint and stop confirm in a dialog and send JSON', async () => {
    await page.getByRole('button', { name: 'Savepoint' }).click();
    const dialog = page.getByRole('dialog', { name: 'Take a savepoint' });
    await dialog.getByRole('button', { name: 'Take savepoint' }).click();
    await page.getByText('Savepoint taken: /data/savepoints/orders/sp-3').waitFor();
    const savepoint = sent('POST', '/v1/pipelines/orders/savepoints').at(-1);
    assert.equal(savepoint.type, 'application/json');
    assert.equal(savepoint.body.toString(), '{}');
    await page.locator('table[aria-label="Checkpoint history"] tr[data-kind="savepoint"]').waitFor();
  });

  await t.test('the state lookup URL-encodes and reads postcard bytes', async () => {
    await page.getByLabel('State', { exact: true }).fill('total');
    await page.getByLabel('Key', { exact: true }).fill('a b&c');
    await page.getByRole('button', { name: 'Look up' }).click();
    const answer = page.locator('.state-answer');
    await answer.waitFor();
    assert.equal(await answer.locator('[data-field="signed"]').innerText(), '4800');
    assert.match(await answer.innerText(), /80 4b/);
    assert.match(await answer.innerText(), /As of the last batch the owning subtask finished .*\(subtask 1\)/);
    await page.getByLabel('Decode').selectOption('i64');
    await page.getByRole('button', { name: 'Look up' }).click();
    await eventually(async () => (await answer.locator('[data-field="value"]').count()) === 1, { what: 'the i64 answer' });
    assert.equal(await answer.locator('[data-field="value"]').innerText(), '4800');
    await page.getByLabel('Decode').selectOption('json');
    await page.getByRole('button', { name: 'Look up' }).click();
    await answer.getByText('Not json; the stored bytes:').waitFor();
  });

  await t.test('the tail keeps the last 100 lines and stops', async () => {
    await page.getByRole('button', { name: 'Tail', exact: true }).click();
    const lines = page.locator('.tail-line');
    await eventually(async () => (await lines.count()) === 100 && /"order_id":149/.test(await lines.last().innerText()), { what: '100 tail lines' });
    assert.match(await lines.first().innerText(), /"order_id":50\b/);
    await page.getByRole('button', { name: 'Stop tail' }).click();
    await page.getByText('stopped', { exact: true }).waitFor();
  });

  await t.test('stop asks whether to take a savepoint', async () => {
    await page.getByRole('button', { name: 'Stop', exact: true }).click();
    const dialog = page.getByRole('dialog', { name: 'Stop the pipeline' });
    await dialog.getByRole('button', { name: 'Stop with savepoint' }).click();
    await page.getByText(/Stopped; final snapshot/).waitFor();
    assert.equal(sent('POST', '/v1/pipelines/orders/stop').at(-1).body.toString(), '{"savepoint":true}');
    await eventually(async () => (await page.locator('.badge').first().innerText()) === 'stopped', { what: 'stopped' });
  });

  await t.test('functions: list and upload as application/wasm', async () => {
    await page.getByRole('link', { name: 'Functions' }).click();
    await page.locator('tr[data-function="revenue"]').waitFor();
    assert.match(await page.locator('tr[data-function="revenue"]').innerText(), /key-function/);
    await page.getByLabel('Name').fill('fresh');
    await page.getByLabel('Component or module').setInputFiles({ name: 'fresh.wasm', mimeType: 'application/wasm', buffer: Buffer.from([0, 0x61, 0x73, 0x6d, 1, 0, 0, 0]) });
    await page.getByRole('button', { name: 'Upload' }).click();
    await page.getByText('Stored fresh version 1').waitFor();
    const upload = sent('PUT', '/v1/functions/fresh').at(-1);
    assert.equal(upload.type, 'application/wasm');
    assert.deepEqual([...upload.body], [0, 0x61, 0x73, 0x6d, 1, 0, 0, 0]);
  });

  await t.test('sign out forgets the token', async () => {
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByLabel('API token').waitFor();
    assert.equal(await page.evaluate(() => sessionStorage.getItem('weir.console.token')), null);
  });

  assert.deepEqual(unexpected(errors), [], 'no page errors or CSP violations');
});

test('a cluster pipeline: its units on their workers, no savepoint or history, a tail of its Kafka output', { skip: missing ?? false }, async () => {
  const page = await session.context.newPage();
  const asked = [];
  page.on('request', (r) => asked.push(r.url()));
  try {
    await page.goto(`${stub.url}/console/#/pipelines/fleet`);
    await page.getByLabel('API token').fill(TOKEN);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.locator('section.worker[data-worker="w1"]').waitFor();
    const boxes = await page.locator('section.worker').evaluateAll((ws) =>
      ws.map((w) => [w.dataset.worker, [...w.querySelectorAll('.unit')].map((u) => `${u.dataset.unit}:${u.dataset.state}`)]),
    );
    assert.deepEqual(boxes, [
      ['w1', ['fleet-keyed-0:running', 'fleet-source-0:running']],
      ['w2', ['fleet-keyed-1:failed', 'fleet-source-1:starting']],
      ['w3', []],
    ]);
    assert.match(await page.locator('section.worker[data-worker="w3"] [data-field="waiting"]').innerText(), /revenue version 2 is not loaded/);
    assert.match(await page.locator('.unit[data-unit="fleet-keyed-1"]').innerText(), /function trapped/);
    const border = await page.locator('.unit[data-unit="fleet-keyed-1"]').evaluate((u) => getComputedStyle(u).borderLeftColor);
    assert.equal(border, 'rgb(217, 52, 43)', 'a failed unit is red');
    assert.equal(await page.locator('table[aria-label="Units"] tbody tr').count(), 4);
    assert.match(await page.locator('table[aria-label="Units"] tr[data-unit="fleet-keyed-0"]').innerText(), /#41\s+#40/);
    assert.equal(await page.locator('[data-field="placement"]').innerText(), '2 of 4 units running on 2 workers, 1 waiting');
    assert.equal(await page.locator('svg.graph').count(), 0, 'no operator graph');
    assert.equal(await page.getByRole('button', { name: 'Savepoint' }).isDisabled(), false, 'a cluster takes savepoints too');
    assert.equal(await page.getByRole('button', { name: 'Tail', exact: true }).count(), 1, 'its Kafka output');
    assert.equal(await page.locator('table[aria-label="Checkpoint history"]').count(), 0);
    assert.deepEqual(asked.filter((u) => u.includes('/fleet/checkpoints')), [], 'no history asked for');
    await eventually(async () => (await page.locator('[data-field="in-rate"]').innerText()) !== '—', { what: 'a rate from the counts' });
    await screenshot(page, 'stub-cluster-pipeline', { fullPage: true });
    // Stop, here without a savepoint (a cluster's drains its units first).
    await page.getByRole('button', { name: 'Stop', exact: true }).click();
    const dialog = page.getByRole('dialog', { name: 'Stop the pipeline' });
    assert.match(await dialog.innerText(), /drained first/);
    await dialog.getByRole('button', { name: 'Stop without savepoint' }).click();
    await page.getByText('Stopped.').waitFor();
    assert.equal(stub.requests.filter((r) => r.path === '/v1/pipelines/fleet/stop').at(-1).body.toString(), '{"savepoint":false}');

    // A stopped one lists no units: the server's not_on_cluster answer tells.
    await page.goto(`${stub.url}/console/#/pipelines/fleet-stopped`);
    await page.locator('[data-field="checkpoints-note"]').filter({ hasText: 'not supported on a cluster' }).waitFor();
    assert.equal(await page.getByRole('button', { name: 'Savepoint' }).isDisabled(), true, 'nothing runs to take it of');
    assert.equal(await page.getByRole('button', { name: 'Upgrade' }).isDisabled(), false, 'a stopped cluster pipeline starts again by an upgrade');
    assert.match(await page.locator('.workers, .muted').filter({ hasText: 'No worker reports' }).innerText(), /No worker reports a unit/);
  } finally {
    await page.close();
  }
});

test('a server without a token skips the login', { skip: missing ?? false }, async () => {
  const open = await startStub({ token: null });
  try {
    const page = await session.context.newPage();
    await page.goto(`${open.url}/console/`);
    await page.getByRole('heading', { name: 'Pipelines' }).waitFor();
    await page.getByText('open server (no token)').waitFor();
    assert.equal(await page.getByLabel('API token').count(), 0);
    await page.close();
  } finally {
    await open.close();
  }
});
