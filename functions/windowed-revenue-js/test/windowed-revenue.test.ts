import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Event } from '@weir/sdk';
import { Harness } from '@weir/sdk/testing';
import WindowedRevenue from '../src/windowed-revenue.ts';

const order = (amount: string) => new Event(`{"customer_id":2,"amount":${amount}}`, 0);

test('sums a window exactly', () => {
  const harness = new Harness(WindowedRevenue);
  const out = harness.aggregate('2', { start: 0, end: 60_000 }, [order('0.10'), order('0.20')]);
  assert.equal(out[0].text(), '{"customer_id":2,"window_start":0,"window_end":60000,"revenue":0.30}');
  assert.equal(out[0].timestamp, 59_999);
  assert.equal(harness.function.merge(150, 250), 400);
});

test('keeps folding into an accumulator (as late events do)', () => {
  const harness = new Harness(WindowedRevenue);
  const acc = harness.accumulate([order('15.50')]);
  assert.equal(acc, 1550);
  assert.equal(harness.accumulate([order('5')], acc), 2050);
  assert.equal(harness.keyText(order('1')), '2');
});
