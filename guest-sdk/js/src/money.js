// Exact money amounts, and JSON output that writes them as decimals.

const I64_MIN = -(2n ** 63n);
const I64_MAX = 2n ** 63n - 1n;

const MAX_SAFE = Number.MAX_SAFE_INTEGER;

// How `toJson` finds Cents in native JSON.stringify output.
let inToJson = false;
const CENTS_MARK = '\u0001weir-cents:';
const CENTS_END = '\u0001';
const MARK_JSON = '\\u0001weir-cents:';
const MARKED = /"\\u0001weir-cents:(-?[0-9]+\.[0-9][0-9])\\u0001"/g;

function badAmount(text) {
  return new Error(`amount ${JSON.stringify(text)} is not a decimal with at most two decimals`);
}

/**
 * An amount of money in integer cents (within the range of a signed 64-bit
 * integer), parsed from decimal text, never through floating point, so
 * sums do not drift. Kept as a number while it is below 2^53 cents and
 * as a BigInt beyond, so common amounts cost no BigInt arithmetic.
 */
export class Cents {
  /** @param cents the amount in cents (a BigInt, or an integer number) */
  constructor(cents = 0) {
    if (typeof cents === 'number') {
      if (!Number.isInteger(cents)) throw new Error(`${cents} is not a whole number of cents`);
      if (cents <= MAX_SAFE && cents >= -MAX_SAFE) {
        this._c = cents;
        return;
      }
      cents = BigInt(cents);
    } else if (typeof cents !== 'bigint') {
      cents = BigInt(cents);
    }
    if (cents < I64_MIN || cents > I64_MAX) throw new Error('amount overflows');
    this._c = cents <= BigInt(MAX_SAFE) && cents >= -BigInt(MAX_SAFE) ? Number(cents) : cents;
  }

  /** The amount in cents, as a BigInt. */
  get cents() {
    return BigInt(this._c);
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
    if (!m) throw badAmount(t);
    const frac = m[3] === undefined || m[3].length === 0 ? 0 : m[3].length === 1 ? +m[3] * 10 : +m[3];
    if (m[2].length <= 13) {
      const c = +m[2] * 100 + frac;
      return new Cents(m[1] ? -c : c);
    }
    const c = BigInt(m[2]) * 100n + BigInt(frac);
    if (c > I64_MAX) throw badAmount(t);
    return new Cents(m[1] ? -c : c);
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
    const o = other instanceof Cents ? other : Cents.from(other);
    if (typeof this._c === 'number' && typeof o._c === 'number') {
      const sum = this._c + o._c;
      if (sum <= MAX_SAFE && sum >= -MAX_SAFE) return new Cents(sum);
    }
    return new Cents(BigInt(this._c) + BigInt(o._c));
  }

  /** The difference; an error when it leaves the signed 64-bit range. */
  sub(other) {
    const o = other instanceof Cents ? other : Cents.from(other);
    if (typeof this._c === 'number' && typeof o._c === 'number') {
      const d = this._c - o._c;
      if (d <= MAX_SAFE && d >= -MAX_SAFE) return new Cents(d);
    }
    return new Cents(BigInt(this._c) - BigInt(o._c));
  }

  /** Whether both amounts are the same. */
  equals(other) {
    return other instanceof Cents && BigInt(other._c) === BigInt(this._c);
  }

  /** The amount with two decimals, e.g. `50.00` or `-0.05`. */
  toString() {
    const c = this._c;
    if (typeof c === 'number') {
      const abs = c < 0 ? -c : c;
      const whole = Math.floor(abs / 100);
      const frac = abs - whole * 100;
      return (c < 0 ? '-' : '') + whole + (frac < 10 ? '.0' : '.') + frac;
    }
    const neg = c < 0n;
    const abs = neg ? -c : c;
    const frac = String(abs % 100n);
    return `${neg ? '-' : ''}${abs / 100n}.${frac.length === 1 ? '0' + frac : frac}`;
  }

  /** The cents as a number (exact below 2^53). */
  toNumber() {
    return Number(this._c);
  }

  /** In `JSON.stringify`: the decimal text as a string (`toJson` writes a number). */
  toJSON() {
    return inToJson ? CENTS_MARK + this.toString() + CENTS_END : this.toString();
  }
}

/**
 * `value` as compact JSON text, like `JSON.stringify` except that `Cents`
 * are written as decimal numbers with two decimals (`"amount":30.00`) and
 * BigInts as integer numbers. Object keys keep their insertion order.
 */
export function toJson(value) {
  // Fast path: the native JSON.stringify, with Cents marked and turned
  // into bare numbers after (BigInts make it throw: then the slow path).
  if (typeof value === 'object' && value !== null && !(value instanceof Cents)) {
    inToJson = true;
    let text;
    try {
      text = JSON.stringify(value);
    } catch (e) {
      text = undefined;
    } finally {
      inToJson = false;
    }
    if (text !== undefined) return text.indexOf(MARK_JSON) < 0 ? text : text.replace(MARKED, '$1');
  }
  return slowJson(value);
}

/** `toJson` by hand (values with BigInts). */
function slowJson(value) {
  if (value instanceof Cents) return value.toString();
  switch (typeof value) {
    case 'bigint':
      return value.toString();
    case 'object': {
      if (value === null) return 'null';
      if (Array.isArray(value)) {
        return '[' + value.map((v) => (v === undefined || typeof v === 'function' ? 'null' : slowJson(v))).join(',') + ']';
      }
      if (typeof value.toJSON === 'function') return slowJson(value.toJSON());
      let out = '{';
      let first = true;
      for (const k of Object.keys(value)) {
        const v = value[k];
        if (v === undefined || typeof v === 'function' || typeof v === 'symbol') continue;
        out += (first ? '' : ',') + JSON.stringify(k) + ':' + slowJson(v);
        first = false;
      }
      return out + '}';
    }
    default:
      return JSON.stringify(value);
  }
}
