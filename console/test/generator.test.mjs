import assert from 'node:assert/strict';
import { test } from 'node:test';

import { SplitMix64, orderReaching, orders, splitmix64Big } from './generator.mjs';

test('the 32-bit SplitMix64 matches the BigInt one', () => {
  for (const seed of [0, 1, 42, 2 ** 40 + 7]) {
    const fast = new SplitMix64(seed);
    const big = splitmix64Big(BigInt(seed));
    for (let i = 0; i < 20_000; i++) {
      const m = i % 2 === 0 ? 10 : 10_000;
      assert.equal(fast.nextMod(m), Number(big.next().value % BigInt(m)), `seed ${seed}, draw ${i}`);
    }
  }
});

test('orders and running totals', () => {
  const first = [];
  for (const order of orders({ keys: 10 })) {
    if (order.id > 50) break;
    first.push(order);
  }
  assert.ok(first.every((o) => o.customer >= 1 && o.customer <= 10 && o.cents >= 1 && o.cents <= 10_000));
  const mine = first.filter((o) => o.customer === first[0].customer);
  const total = mine.slice(0, 3).reduce((s, o) => s + o.cents, 0);
  assert.equal(orderReaching(total, first[0].customer, { keys: 10, maxId: 50 }), mine[Math.min(2, mine.length - 1)].id);
  assert.equal(orderReaching(total + 0.5, first[0].customer, { keys: 10, maxId: 50 }), null);
});
