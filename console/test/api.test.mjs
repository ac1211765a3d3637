import assert from 'node:assert/strict';
import { test } from 'node:test';

import { ApiError, createApi } from '../src/api.js';

/** A fetch that records its calls and answers `respond(url, init)`. */
function fakeFetch(respond) {
  const calls = [];
  const fetch = async (url, init) => {
    calls.push({ url, init });
    return respond(url, init);
  };
  return { calls, fetch };
}

const json = (status, body) => new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json' } });

test('the token goes in the Authorization header, never the URL', async () => {
  const { calls, fetch } = fakeFetch(() => json(200, { pipelines: [] }));
  const api = createApi({ token: () => 's3cret', fetch });
  assert.deepEqual(await api.get('/v1/pipelines'), { pipelines: [] });
  assert.equal(calls[0].url, '/v1/pipelines');
  assert.equal(calls[0].init.headers.Authorization, 'Bearer s3cret');
  assert.equal(calls[0].init.credentials, 'omit');
  assert.ok(!calls[0].url.includes('s3cret'));
  const open = createApi({ token: () => null, fetch });
  await open.get('/v1/pipelines');
  assert.equal(calls[1].init.headers.Authorization, undefined);
});

test('bodies say their type: JSON by default, YAML or Wasm when told', async () => {
  const { calls, fetch } = fakeFetch(() => new Response(null, { status: 204 }));
  const api = createApi({ token: () => 't', fetch });
  await api.post('/v1/pipelines/p/stop', { savepoint: true });
  assert.equal(calls[0].init.headers['Content-Type'], 'application/json');
  assert.equal(calls[0].init.body, '{"savepoint":true}');
  await api.post('/v1/pipelines', 'name: p\n', { type: 'application/yaml' });
  assert.equal(calls[1].init.headers['Content-Type'], 'application/yaml');
  assert.equal(calls[1].init.body, 'name: p\n');
  const bytes = new Uint8Array([0, 97, 115, 109]).buffer;
  await api.put('/v1/functions/f', bytes, { type: 'application/wasm' });
  assert.equal(calls[2].init.headers['Content-Type'], 'application/wasm');
  assert.equal(calls[2].init.body, bytes);
  assert.equal(await api.del('/v1/pipelines/p'), null);
  assert.equal(calls[3].init.headers['Content-Type'], undefined, 'no body, no type');
});

test("errors carry the server's message; a 401 also signs out", async () => {
  const seen = [];
  const { fetch } = fakeFetch((url) =>
    url === '/v1/pipelines'
      ? json(401, { error: { code: 'unauthorized', message: 'a valid `Authorization: Bearer <token>` header is required' } })
      : json(409, { error: { code: 'exists', message: 'pipeline orders already exists' } }),
  );
  const api = createApi({ token: () => 'bad', fetch, onUnauthorized: (e) => seen.push(e) });
  await assert.rejects(api.post('/v1/x', {}), (e) => e instanceof ApiError && e.status === 409 && e.code === 'exists' && e.message === 'pipeline orders already exists');
  assert.equal(seen.length, 0);
  await assert.rejects(api.get('/v1/pipelines'), { status: 401, code: 'unauthorized' });
  assert.equal(seen.length, 1);
  await assert.rejects(api.request('GET', '/v1/pipelines', { tokenOverride: 'try' }), { status: 401 });
  assert.equal(seen.length, 1, 'trying a token at login does not sign out');
});

test('a non-JSON error keeps its text; a network failure says so', async () => {
  const { fetch } = fakeFetch(() => new Response('bad gateway', { status: 502, statusText: 'Bad Gateway' }));
  await assert.rejects(createApi({ token: () => null, fetch }).get('/x'), { status: 502, message: 'bad gateway' });
  const down = createApi({ token: () => null, fetch: async () => { throw new TypeError('Failed to fetch'); } });
  await assert.rejects(down.get('/x'), { code: 'network', message: /cannot reach the server/ });
});
