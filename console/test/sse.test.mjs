import assert from 'node:assert/strict';
import { test } from 'node:test';

import { SseParser, keepLast, readEvents } from '../src/sse.js';

const data = (events) => events.map((e) => e.data);

test('events end at a blank line; data lines join with a newline', () => {
  const parser = new SseParser();
  assert.deepEqual(data(parser.push('data: {"a":1}\n\ndata: x\ndata: y\n\n')), ['{"a":1}', 'x\ny']);
  assert.deepEqual(parser.push('data: no end yet\n'), []);
  assert.deepEqual(data(parser.push('\n')), ['no end yet']);
});

test('chunks may split anywhere, even inside a CRLF', () => {
  const text = 'data: one\r\n\r\ndata:two\r\rdata: three\n\n';
  for (let size = 1; size <= text.length; size++) {
    const parser = new SseParser();
    const events = [];
    for (let i = 0; i < text.length; i += size) events.push(...parser.push(text.slice(i, i + size)));
    events.push(...parser.end());
    assert.deepEqual(data(events), ['one', 'two', 'three'], `chunks of ${size}`);
  }
});

test('comments, event names, ids and unknown fields', () => {
  const parser = new SseParser();
  const events = parser.push(': keep-alive\n\nevent: end\nid: 7\nretry: 10\ndata\n\nfoo: bar\n\n');
  assert.deepEqual(events, [{ event: 'end', data: '', id: '7' }]);
  assert.equal(parser.push('data: later\n\n')[0].id, '7', 'the last id stays');
});

test('only one space after the colon is dropped; a BOM at the start is', () => {
  const parser = new SseParser();
  assert.deepEqual(data(parser.push('\ufeffdata:  two spaces\n\n')), [' two spaces']);
});

test('an event the stream ends inside is dropped', () => {
  const parser = new SseParser();
  assert.deepEqual(parser.push('data: half'), []);
  assert.deepEqual(parser.end(), []);
});

test('readEvents reads a fetch body until it ends, and stops on abort', async () => {
  const chunks = ['data: {"timestamp":1,"key":"2","value":"a"}\n', '\ndata: b\n\n', 'data: cut'];
  const body = new ReadableStream({
    start(controller) {
      for (const c of chunks) controller.enqueue(new TextEncoder().encode(c));
      controller.close();
    },
  });
  const seen = [];
  await readEvents(new Response(body), (e) => seen.push(e.data));
  assert.deepEqual(seen, ['{"timestamp":1,"key":"2","value":"a"}', 'b']);

  const endless = new ReadableStream({
    pull(controller) {
      return new Promise((resolve) => setTimeout(() => {
        controller.enqueue(new TextEncoder().encode('data: tick\n\n'));
        resolve();
      }, 5));
    },
  });
  const abort = new AbortController();
  const ticks = [];
  const reading = readEvents(new Response(endless), (e) => {
    ticks.push(e.data);
    if (ticks.length === 3) abort.abort();
  }, abort.signal);
  await assert.rejects(reading, { name: 'AbortError' });
  assert.equal(ticks.length, 3);
});

test('the tail keeps the last lines', () => {
  const lines = Array.from({ length: 95 }, (_, i) => i);
  const kept = keepLast(lines, [95, 96, 97, 98, 99, 100, 101], 100);
  assert.equal(kept.length, 100);
  assert.equal(kept[0], 2);
  assert.equal(kept[99], 101);
  assert.deepEqual(keepLast([1], [2]), [1, 2]);
});
