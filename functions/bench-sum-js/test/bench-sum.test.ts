import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Event } from '@weir/sdk';
import { Harness } from '@weir/sdk/testing';
import BenchSum, { pair } from '../src/bench-sum.ts';

/** A binary order (24 bytes, little-endian). */
function order(id: number, customer: number, cents: number): Event {
  const out = new Uint8Array(24);
  const view = new DataView(out.buffer);
  view.setBigUint64(0, BigInt(id), true);
  view.setBigUint64(8, BigInt(customer), true);
  view.setBigInt64(16, BigInt(cents), true);
  return new Event(out, id);
}

const key = (n: number) => pair(n, 0).subarray(0, 8);

test('running and windowed totals', () => {
  const harness = new Harness(BenchSum);
  assert.deepEqual(harness.key(order(1, 7, 250)), key(7));
  const out = harness.process(key(7), [order(1, 7, 250), order(2, 7, 100)]);
  assert.deepEqual(out.map((e) => e.value), [pair(7, 250), pair(7, 350)]);
  assert.deepEqual(out.map((e) => e.timestamp), [1, 2]);
  const again = harness.process(key(7), [order(3, 7, -50)]);
  assert.deepEqual(again[0].value, pair(7, 300));
  assert.equal(harness.value(key(7), 'total'), 300);
  const windowed = harness.aggregate(key(7), { start: 0, end: 60_000 }, [order(1, 7, 5), order(2, 7, 6)]);
  assert.deepEqual(windowed[0].value, pair(7, 11));
  assert.equal(windowed[0].timestamp, 59_999);
});

test('pairs are summed per region', () => {
  const harness = new Harness(BenchSum);
  const first = new Event(pair(70, 250), 1);
  const second = new Event(pair(6, 100), 2);
  assert.deepEqual(harness.key(first), key(6));
  assert.deepEqual(harness.key(second), key(6));
  const out = harness.process(key(6), [first, second]);
  assert.deepEqual(out.map((e) => e.value), [pair(6, 250), pair(6, 350)]);
  assert.throws(() => harness.key(new Event(new Uint8Array(20), 3)), /not 20 bytes/);
});

test('one host call for the outputs, none for the state read ahead', () => {
  const harness = new Harness(BenchSum);
  harness.process(key(1), [order(1, 1, 1)]); // opens the state
  const before = harness.hostCalls;
  harness.process(key(1), [order(2, 1, 1), order(3, 1, 1), order(4, 1, 1)]);
  const after = harness.hostCalls;
  assert.equal(after.emitBatch - (before.emitBatch ?? 0), 1);
  assert.equal(after.writeValues - (before.writeValues ?? 0), 1);
  assert.equal(after['value.get'] ?? 0, before['value.get'] ?? 0);
  assert.equal(after.selectKey ?? 0, before.selectKey ?? 0);
});
