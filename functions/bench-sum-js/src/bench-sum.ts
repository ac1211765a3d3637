/**
 * The running-sum workload of `weir bench` in TypeScript: the twin of
 * functions/bench-sum, over binary orders (24 bytes: `order_id`,
 * `customer_id` u64 and `amount_cents` i64, little-endian; what the
 * generator makes with `encoding: binary`).
 *
 * * key: the customer id's 8 bytes (for a 16-byte `(customer, total)` pair
 *   of the two-stage workload: `customer % 64`, its region);
 * * process: the key's running total in cents, one 16-byte
 *   `(customer, total)` output per order;
 * * aggregate: the total per key per window, `(customer, total)` at the
 *   window's end.
 *
 * The hot path reads the packed batch through a DataView and writes the
 * outputs straight into the output buffer: no object and no host call per
 * event. Totals are exact up to 2^53 cents (an error beyond).
 * Build: `node guest-sdk/js/bin/weir-build.mjs functions/bench-sum-js -o target/functions/bench-sum-js.wasm`
 */
import { AggregateFunction, Context, Event, EventList, KeyFunction, KeyWriter, ProcessFunction, ValueState, Window } from '@weir/sdk';

/** Bytes of a binary order. */
const ORDER_BYTES = 24;
/** Bytes of a `(customer, total)` pair. */
const PAIR_BYTES = 16;
/** Regions a pair is re-keyed into: `customer % REGIONS`. */
const REGIONS = 64;
const TWO_32 = 4294967296;

/** The signed 64-bit little-endian integer at `at`, as a number (exact below 2^53). */
function i64(view: DataView, at: number): number {
  return view.getInt32(at + 4, true) * TWO_32 + view.getUint32(at, true);
}

/** Write `value` (a safe integer) as a signed 64-bit little-endian integer at `at`. */
function setI64(view: DataView, at: number, value: number): void {
  const hi = Math.floor(value / TWO_32);
  view.setUint32(at, value - hi * TWO_32, true);
  view.setInt32(at + 4, hi, true);
}

function badLength(length: number): Error {
  return new Error(`an order (24 bytes) or a (customer, total) pair (16 bytes), not ${length} bytes`);
}

/** `(a, b)` as 16 bytes. */
export function pair(a: number, b: number): Uint8Array {
  const out = new Uint8Array(PAIR_BYTES);
  const view = new DataView(out.buffer);
  setI64(view, 0, a);
  setI64(view, 8, b);
  return out;
}

/** The amount of the input at `[start, end)`: an order's cents, or a pair's total. */
function amountAt(view: DataView, start: number, end: number): number {
  const length = end - start;
  if (length === ORDER_BYTES) return i64(view, start + 16);
  if (length === PAIR_BYTES) return i64(view, start + 8);
  throw badLength(length);
}

/** The function: running and windowed sums per customer (or per region of pairs). */
export default class BenchSum implements KeyFunction, ProcessFunction, AggregateFunction<number> {
  /** The key's running total in cents. */
  total = new ValueState<number>('total');

  key(event: Event): Uint8Array {
    const v = event.value;
    if (v.length === ORDER_BYTES) return v.slice(8, 16);
    if (v.length === PAIR_BYTES) return pair(v[0] % REGIONS, 0).subarray(0, 8);
    throw badLength(v.length);
  }

  /** The keys of a whole batch, copied in place (what the SDK calls when present). */
  keysInto(events: EventList, out: KeyWriter): void {
    const src = events.bytes;
    let start = events.start(0);
    for (let i = 0, n = events.length; i < n; i++) {
      const end = events.end(i);
      const at = out.reserve(8);
      const dst = out.bytes;
      if (end - start === ORDER_BYTES) {
        const s = start + 8;
        dst[at] = src[s];
        dst[at + 1] = src[s + 1];
        dst[at + 2] = src[s + 2];
        dst[at + 3] = src[s + 3];
        dst[at + 4] = src[s + 4];
        dst[at + 5] = src[s + 5];
        dst[at + 6] = src[s + 6];
        dst[at + 7] = src[s + 7];
      } else if (end - start === PAIR_BYTES) {
        dst.fill(0, at, at + 8);
        dst[at] = src[start] % REGIONS;
      } else {
        throw badLength(end - start);
      }
      start = end;
    }
  }

  process(key: Uint8Array, events: EventList, ctx: Context): void {
    if (key.length !== 8) throw new Error('a key is 8 bytes');
    let total = this.total.get() ?? 0;
    const view = events.data;
    // The output's first 8 bytes: the key (the customer, or the region).
    const lo = (key[0] | (key[1] << 8) | (key[2] << 16) | (key[3] << 24)) >>> 0;
    const hi = (key[4] | (key[5] << 8) | (key[6] << 16) | (key[7] << 24)) >>> 0;
    let start = events.start(0);
    for (let i = 0, n = events.length; i < n; i++) {
      const end = events.end(i);
      const length = end - start;
      const amount =
        length === ORDER_BYTES
          ? view.getInt32(start + 20, true) * TWO_32 + view.getUint32(start + 16, true)
          : amountAt(view, start, end);
      start = end;
      total += amount;
      if (total > Number.MAX_SAFE_INTEGER || total < -Number.MAX_SAFE_INTEGER) throw new Error('total overflows');
      const at = ctx.reserveAt(PAIR_BYTES, events, i);
      const out = ctx.outputView;
      out.setUint32(at, lo, true);
      out.setUint32(at + 4, hi, true);
      const th = Math.floor(total / TWO_32);
      out.setUint32(at + 8, total - th * TWO_32, true);
      out.setInt32(at + 12, th, true);
    }
    this.total.set(total);
  }

  createAccumulator(): number {
    return 0;
  }

  add(total: number, event: Event): number {
    const v = event.value;
    const sum = total + amountAt(new DataView(v.buffer, v.byteOffset, v.length), 0, v.length);
    if (!Number.isSafeInteger(sum)) throw new Error('total overflows');
    return sum;
  }

  merge(a: number, b: number): number {
    return a + b;
  }

  result(key: Uint8Array, window: Window, total: number): Event {
    if (key.length !== 8) throw new Error('a key is 8 bytes');
    const out = new Uint8Array(PAIR_BYTES);
    out.set(key, 0);
    setI64(new DataView(out.buffer), 8, total);
    return new Event(out, window.end - 1);
  }
}
