import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Cents, Codec, Event, ListState, MapState, Ttl, ValueState, toJson, text, rolesOf, FunctionError } from '@weir/sdk';
import { Harness } from '@weir/sdk/testing';
import { functionModule, rolesOfModule, BuildError } from '../src/build.js';

test('Cents parses exactly, with the Rust SDK rules', () => {
  assert.equal(Cents.parse('20.00').cents, 2000n);
  assert.equal(Cents.parse('7.5').cents, 750n);
  assert.equal(Cents.parse('"12"').cents, 1200n);
  assert.equal(Cents.parse('-0.05').cents, -5n);
  assert.equal(new Cents(-5n).toString(), '-0.05');
  assert.equal(new Cents(5000).toString(), '50.00');
  for (const bad of ['1.234', 'abc', '', '1e3', '--1', '.', '99999999999999999999']) {
    assert.throws(() => Cents.parse(bad), /not a decimal/, bad);
  }
  assert.throws(() => new Cents(2n ** 63n - 1n).add(new Cents(1)), /overflows/);
  assert.equal(Cents.parse('0.10').add(Cents.parse('0.20')).toString(), '0.30');
  assert.equal(Cents.from(15.5).cents, 1550n);
});

test('toJson writes Cents and BigInts as numbers, compactly', () => {
  assert.equal(toJson({ a: new Cents(1550), b: 10n, c: 'x', d: [1, null], e: undefined }), '{"a":15.50,"b":10,"c":"x","d":[1,null]}');
  assert.equal(toJson({ a: [new Cents(-5), { b: new Cents(2n ** 62n) }], s: 'x\u0001' }), '{"a":[-0.05,{"b":46116860184273879.04}],"s":"x\\u0001"}');
  assert.equal(JSON.stringify({ a: new Cents(1) }), '{"a":"0.01"}');
  assert.equal(text(Codec.json.encode({ total: 5 })), '{"total":5}');
  assert.equal(Codec.bigint.decode(Codec.bigint.encode(2n ** 60n)), 2n ** 60n);
});

/** Counts events per key in a value state; emits the count. */
class Counter {
  count = new ValueState('count');
  process(key, events, ctx) {
    let n = this.count.get() ?? 0;
    for (const e of events) {
      n += 1;
      ctx.emit(`${text(key)}:${n}`, e.timestamp);
    }
    this.count.set(n);
  }
}

test('value state is read ahead and written back once per call', () => {
  const h = new Harness(Counter);
  h.process('a', [new Event('x', 1)]); // first use: opens the state
  const before = h.hostCalls;
  const out = h.process('a', [new Event('x', 2), new Event('y', 3)]);
  assert.deepEqual(out.map((e) => [e.text(), e.timestamp]), [['a:2', 2], ['a:3', 3]]);
  const after = h.hostCalls;
  assert.equal(after['value.get'], before['value.get']);
  assert.equal(after.selectKey ?? 0, before.selectKey ?? 0);
  assert.equal(after.writeValues, (before.writeValues ?? 0) + 1);
  assert.equal(after.emitBatch, before.emitBatch + 1);
  assert.equal(h.value('a', 'count'), 3);
  assert.equal(h.value('b', 'count'), undefined);
});

/** Remembers values per key in map and list state with a TTL; a timer flushes them. */
class Remember {
  seen = new MapState('seen', { ttl: Ttl.afterWrite(1000) });
  log = new ListState('log');
  process(_key, events, ctx) {
    for (const e of events) {
      this.seen.put(e.text(), e.timestamp);
      this.log.add(e.text());
      ctx.registerEventTimeTimer(e.timestamp + 10);
    }
    ctx.log('info', `watermark ${ctx.watermark}`);
  }
  onTimer(key, timer, ctx) {
    ctx.emit(Event.fromJson({ key: text(key), at: timer.timestamp, domain: timer.domain, log: this.log.get(), seen: this.seen.keys() }, timer.timestamp));
    ctx.emitTo('audit', new Event('fired', timer.timestamp));
    this.log.clear();
  }
}

test('map and list state, event-time timers, side outputs and logs', () => {
  const h = new Harness(Remember);
  h.setWatermark(0);
  assert.deepEqual(h.process('k', [new Event('b', 5), new Event('a', 7)]), []);
  assert.deepEqual(h.pendingTimers().map((t) => t.timestamp), [15, 17]);
  const fired = h.advanceWatermark(16);
  assert.deepEqual(fired.map((e) => e.json()), [{ key: 'k', at: 15, domain: 'event-time', log: ['b', 'a'], seen: ['a', 'b'] }]);
  assert.deepEqual(h.advanceWatermark(100).map((e) => e.json().log), [[]]);
  assert.equal(h.takeSideOutput('audit').length, 2);
  assert.deepEqual(h.logs, [['info', 'watermark 0']]);
  h.setProcessingTime(5000); // past the map's time to live
  assert.deepEqual(h.process('k', [new Event('c', 200)]), []);
  assert.deepEqual(h.advanceWatermark(300)[0].json().seen, ['c']);
});

class Failing {
  total = new ValueState('total');
  process(key, events) {
    this.total.set(events.length);
    if (text(key) === 'bad') throw new Error('no bad keys');
  }
}

test('an exception fails the call with its message; earlier writes are kept', () => {
  const h = new Harness(Failing);
  h.process('good', [new Event('x', 1)]);
  assert.throws(() => h.process('bad', [new Event('x', 1), new Event('y', 2)]), (e) => e instanceof FunctionError && e.message === 'no bad keys');
  assert.equal(h.value('bad', 'total'), 2);
});

test('transform, raw codecs, roles', () => {
  const shout = { transform: (e, out) => e.value.length && out.emit(e.text().toUpperCase(), e.timestamp) };
  const h = new Harness(shout);
  assert.deepEqual(h.transform([new Event('hi', 1), new Event('', 2)]).map((e) => e.text()), ['HI']);
  assert.deepEqual(rolesOf(new Counter()), ['process']);
  assert.deepEqual(rolesOf(shout), ['transform']);
  const raw = new ValueState('raw', { codec: Codec.bytes });
  class Raw {
    process(_k, events) {
      raw.set(events.at(0).value);
    }
  }
  const hr = new Harness(Raw);
  hr.process('k', [new Event(new Uint8Array([1, 2, 3]), 0)]);
  assert.deepEqual(hr.value('k', 'raw', Codec.bytes), new Uint8Array([1, 2, 3]));
});

test('events keep source keys and headers through a batch', () => {
  const echo = { process: (_k, events, ctx) => events.forEach((e) => ctx.emit(e)) };
  const h = new Harness(echo);
  const out = h.process('k', [new Event('v', 3, { key: 'src', headers: [['h', 'x']] }), new Event('w', 4)]);
  assert.equal(text(out[0].key), 'src');
  assert.equal(text(out[0].header('h')), 'x');
  assert.equal(out[1].key, undefined);
});

test('the build finds the roles, and says what is wrong', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'weir-sdk-test-'));
  assert.throws(() => functionModule(dir), BuildError);
  writeFileSync(join(dir, 'package.json'), '{"weir":{"function":"src/f.ts"}}');
  assert.throws(() => functionModule(dir), /does not exist/);
  mkdirSync(join(dir, 'src'));
  writeFileSync(join(dir, 'src/f.ts'), 'export default class Nothing { hello(): void {} }');
  await assert.rejects(rolesOfModule(join(dir, 'src/f.ts'), dir), /implements no role/);
  writeFileSync(
    join(dir, 'src/f.ts'),
    "import { ValueState } from '@weir/sdk';\nexport default class F { s = new ValueState<number>('s'); key(e: any) { return 'k'; } add(a: number) { return a; } result() { return []; } }",
  );
  assert.deepEqual(await rolesOfModule(join(dir, 'src/f.ts'), dir), ['key', 'aggregate']);
});
