// The orders of weir's generator source (host/src/connectors/generator.rs)
// worked out here, so the browser test knows what running total the state
// of a customer may hold: order i (from 1) draws its customer and then its
// amount from a SplitMix64 stream seeded with `seed`.
//
// 64-bit arithmetic is done on two 32-bit halves (BigInt is too slow for
// the millions of orders a test pipeline reads); `splitmix64Big` is the
// plain BigInt version the unit test checks it against.

const GAMMA_HI = 0x9e3779b9;
const GAMMA_LO = 0x7f4a7c15;

/** The low 64 bits of (ahi:alo) × (bhi:blo), as [hi, lo]. */
function mul64(ahi, alo, bhi, blo) {
  const a0 = alo & 0xffff;
  const a1 = alo >>> 16;
  const b0 = blo & 0xffff;
  const b1 = blo >>> 16;
  const a0b0 = a0 * b0;
  const a1b0 = a1 * b0;
  const a0b1 = a0 * b1;
  const a1b1 = a1 * b1;
  const mid = (a0b0 >>> 16) + (a1b0 & 0xffff) + (a0b1 & 0xffff);
  const carry = a1b1 + (a1b0 >>> 16) + (a0b1 >>> 16) + Math.floor(mid / 65536);
  const lo = ((mid & 0xffff) * 65536 + (a0b0 & 0xffff)) >>> 0;
  const hi = (carry + Math.imul(ahi, blo) + Math.imul(alo, bhi)) >>> 0;
  return [hi, lo];
}

/** (hi:lo) >>> n for 0 < n < 32, as [hi, lo]. */
const shr = (hi, lo, n) => [hi >>> n, ((lo >>> n) | (hi << (32 - n))) >>> 0];

/** (hi:lo) mod m, for m < 2^26. */
const mod = (hi, lo, m) => (((hi % m) * (2 ** 32 % m)) % m + (lo % m)) % m;

/** The generator's random stream from `seed` (a Number below 2^53). */
export class SplitMix64 {
  constructor(seed = 0) {
    this.hi = Math.floor(seed / 2 ** 32) >>> 0;
    this.lo = seed >>> 0;
  }

  /** The next number modulo `m`. */
  nextMod(m) {
    const lo = this.lo + GAMMA_LO;
    this.hi = (this.hi + GAMMA_HI + (lo > 0xffffffff ? 1 : 0)) >>> 0;
    this.lo = lo >>> 0;
    let [h, l] = [this.hi, this.lo];
    let [sh, sl] = shr(h, l, 30);
    [h, l] = mul64((h ^ sh) >>> 0, (l ^ sl) >>> 0, 0xbf58476d, 0x1ce4e5b9);
    [sh, sl] = shr(h, l, 27);
    [h, l] = mul64((h ^ sh) >>> 0, (l ^ sl) >>> 0, 0x94d049bb, 0x133111eb);
    [sh, sl] = shr(h, l, 31);
    return mod((h ^ sh) >>> 0, (l ^ sl) >>> 0, m);
  }
}

/** The same stream with BigInt: slow, obviously right. */
export function* splitmix64Big(seed = 0n) {
  const M = (1n << 64n) - 1n;
  let state = BigInt(seed);
  for (;;) {
    state = (state + 0x9e3779b97f4a7c15n) & M;
    let z = state;
    z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & M;
    z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & M;
    yield z ^ (z >> 31n);
  }
}

/** The generator's orders: `{ id, customer, cents }`, from order 1 on. */
export function* orders({ keys = 100, seed = 0 } = {}) {
  const random = new SplitMix64(seed);
  for (let id = 1; ; id++) {
    const customer = random.nextMod(keys) + 1;
    const cents = random.nextMod(10_000) + 1;
    yield { id, customer, cents };
  }
}

/**
 * Whether `total` (cents) is the running total of `customer` after one of
 * its first orders up to order `maxId`: the order it was reached at, or null.
 * Totals only grow (every amount is at least a cent), so this stops early.
 */
export function orderReaching(total, customer, { keys, seed = 0, maxId }) {
  let sum = 0;
  for (const order of orders({ keys, seed })) {
    if (order.id > maxId) return null;
    if (order.customer !== customer) continue;
    sum += order.cents;
    if (sum === total) return order.id;
    if (sum > total) return null;
  }
  return null;
}
