import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Event } from '@weir/sdk';
import { Harness } from '@weir/sdk/testing';
import Revenue from '../src/revenue.ts';

function order(id: number, customer: number, amount: string): Event {
  return new Event(`{"order_id":${id},"customer_id":${customer},"amount":${amount},"event_time":"2026-01-15T10:00:05Z"}`, 0);
}

test('keys by customer', () => {
  const harness = new Harness(Revenue);
  assert.equal(harness.keyText(order(110, 1, '20.00')), '1');
  assert.throws(() => harness.key(new Event('{}', 0)), /not an order/);
});

test('keeps a running total per customer', () => {
  const harness = new Harness(Revenue);
  const out = harness.process('2', [order(111, 2, '15.50'), order(113, 2, '12.50')]);
  assert.deepEqual(
    out.map((e) => e.text()),
    [
      '{"order_id":111,"customer_id":2,"amount":15.50,"total":15.50}',
      '{"order_id":113,"customer_id":2,"amount":12.50,"total":28.00}',
    ],
  );
  harness.process('1', [order(110, 1, '20.00')]);
  harness.process('2', [order(151, 2, '20.00')]);
  assert.equal(harness.value('2', 'total'), 4800);
  assert.equal(harness.value('1', 'total'), 2000);
});

test('outputs two decimals', () => {
  const harness = new Harness(Revenue);
  const out = harness.process('3', [order(112, 3, '7.25'), order(150, 3, '9.75')]);
  assert.equal(out[1].text(), '{"order_id":150,"customer_id":3,"amount":9.75,"total":17.00}');
});

test('rejects inexact amounts, naming nothing but the amount', () => {
  const harness = new Harness(Revenue);
  assert.throws(() => harness.process('3', [order(1, 3, '1.234')]), /amount "1.234"/);
});
