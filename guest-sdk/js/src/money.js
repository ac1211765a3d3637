// Exact money amounts, and JSON output that writes them as decimals.

const I64_MIN = -(2n ** 63n);
const I64_MAX = 2n ** 63n - 1n;

/**
 * An amount of money in integer cents (a BigInt, within the range of a
 * signed 64-bit integer), parsed from decimal text, never through
 * floating point, so sums do not drift.
 */
export class Cents {
  /** @param cents the amount in cents (a BigInt, or an integer number) */
  constructor(cents = 0n) {
    const c = typeof cents === 'bigint' ? cents : BigInt(cents);
    if (c < I64_MIN || c > I64_MAX) throw new Error('amount overflows');
    this.cents = c;
    Object.freeze(this);
  }

  /**
   * Parse a decimal amount such as `20`, `7.5` or `-12.25` (at most two
   * decimals); surrounding whitespace and quotes are ignored, so the raw
   * text of a JSON number or string both work. The same rules as the Rust
   * SDK's `Cents::parse`.
   */
  static parse(text) {
    const t = String(text).trim().replace(/^"+|"+$/g, '');
    const m = /^(-?)([0-9]+)(?:\.([0-9]{0,2}))?$/.exec(t);
    if (!m) throw new Error(`amount ${JSON.stringify(t)} is not a decimal with at most two decimals`);
    const cents = BigInt(m[2]) * 100n + BigInt(((m[3] || '') + '00').slice(0, 2));
    if (cents > I64_MAX) throw new Error(`amount ${JSON.stringify(t)} is not a decimal with at most two decimals`);
    return new Cents(m[1] ? -cents : cents);
  }

  /**
   * An amount from a parsed JSON value: a number (as JavaScript prints
   * it, so `20.00` in the source reads as `20`), a decimal string, or
   * integer cents as a BigInt.
   */
  static from(value) {
    if (value instanceof Cents) return value;
    if (typeof value === 'bigint') return new Cents(value);
    if (typeof value === 'number' || typeof value === 'string') return Cents.parse(String(value));
    throw new Error(`amount ${String(value)} is not a number or a decimal string`);
  }

  /** The sum; an error when it leaves the signed 64-bit range. */
  add(other) {
    return new Cents(this.cents + Cents.from(other).cents);
  }

  /** The difference; an error when it leaves the signed 64-bit range. */
  sub(other) {
    return new Cents(this.cents - Cents.from(other).cents);
  }

  /** Whether both amounts are the same. */
  equals(other) {
    return other instanceof Cents && other.cents === this.cents;
  }

  /** The amount with two decimals, e.g. `50.00` or `-0.05`. */
  toString() {
    const neg = this.cents < 0n;
    const abs = neg ? -this.cents : this.cents;
    const frac = String(abs % 100n);
    return `${neg ? '-' : ''}${abs / 100n}.${frac.length === 1 ? '0' + frac : frac}`;
  }

  /** The cents as a number (exact below 2^53). */
  toNumber() {
    return Number(this.cents);
  }

  /** In `JSON.stringify`: the decimal text as a string (`toJson` writes a number). */
  toJSON() {
    return this.toString();
  }
}

/**
 * `value` as compact JSON text, like `JSON.stringify` except that `Cents`
 * are written as decimal numbers with two decimals (`"amount":30.00`) and
 * BigInts as integer numbers. Object keys keep their insertion order.
 */
export function toJson(value) {
  if (value instanceof Cents) return value.toString();
  switch (typeof value) {
    case 'bigint':
      return value.toString();
    case 'object': {
      if (value === null) return 'null';
      if (Array.isArray(value)) {
        return '[' + value.map((v) => (v === undefined || typeof v === 'function' ? 'null' : toJson(v))).join(',') + ']';
      }
      if (typeof value.toJSON === 'function') return toJson(value.toJSON());
      let out = '{';
      let first = true;
      for (const k of Object.keys(value)) {
        const v = value[k];
        if (v === undefined || typeof v === 'function' || typeof v === 'symbol') continue;
        out += (first ? '' : ',') + JSON.stringify(k) + ':' + toJson(v);
        first = false;
      }
      return out + '}';
    }
    default:
      return JSON.stringify(value);
  }
}
