// Typed keyed state: value, map and list state with a codec and a TTL.

import { host, batch, selected, growWrites, UNWRITTEN } from './scope.js';
import { toJson } from './money.js';

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/**
 * How state values (and accumulators) become bytes. The default is JSON:
 * UTF-8, compact (no spaces), the same in the Python SDK, so state written
 * by one is readable by the other.
 */
export const Codec = Object.freeze({
  /** Compact JSON (the default). `Cents` and BigInts are written as numbers. */
  json: Object.freeze({
    encode: (value) => encoder.encode(toJson(value)),
    decode: (bytes) => JSON.parse(decoder.decode(bytes)),
  }),
  /** JSON integers read back as BigInt (exact beyond 2^53). */
  bigint: Object.freeze({
    encode: (value) => encoder.encode(BigInt(value).toString()),
    decode: (bytes) => BigInt(decoder.decode(bytes)),
  }),
  /** UTF-8 text as it is. */
  string: Object.freeze({
    encode: (value) => encoder.encode(value),
    decode: (bytes) => decoder.decode(bytes),
  }),
  /** Raw bytes as they are (a copy on read). */
  bytes: Object.freeze({
    encode: (value) => (typeof value === 'string' ? encoder.encode(value) : value),
    decode: (bytes) => bytes.slice(),
  }),
});

/**
 * A time to live: a value not renewed for `millis` of processing time
 * reads as absent and is purged by the host.
 */
export class Ttl {
  constructor(millis, update = 'on-create-and-write') {
    if (!Number.isInteger(millis) || millis < 1) throw new Error('a time to live must be at least a millisecond');
    this.millis = millis;
    this.update = update;
  }

  /** Expire `millis` after the last write (Flink's `OnCreateAndWrite`). */
  static afterWrite(millis) {
    return new Ttl(millis, 'on-create-and-write');
  }

  /** Expire `millis` after the last read or write (`OnReadAndWrite`). */
  static afterAccess(millis) {
    return new Ttl(millis, 'on-read-and-write');
  }
}

function options(opts) {
  return { ttl: (opts && opts.ttl) || undefined, codec: (opts && opts.codec) || Codec.json };
}

/** Base of the state handles: opened lazily, once per host. */
class Handle {
  constructor(name, opts, kind) {
    if (typeof name !== 'string' || name.length === 0) throw new Error('a state name must not be empty');
    const { ttl, codec } = options(opts);
    this.name = name;
    this.ttl = ttl;
    this.codec = codec;
    this._kind = kind;
    this._raw = null;
    this._host = null;
  }

  get raw() {
    if (this._host !== host || this._raw === null) {
      if (!host) throw new Error('state used outside of a function call');
      this._raw = host[this._kind](this.name, this.ttl);
      this._host = host;
    }
    return this._raw;
  }
}

/** A single value per key, served from the batch the host read ahead. */
export class ValueState extends Handle {
  /**
   * @param name the state's name (1 to 255 bytes)
   * @param opts `ttl` and `codec` (JSON by default)
   */
  constructor(name, opts = undefined) {
    super(name, opts, 'openValue');
    this._gen = -1;
    this._slot = -1;
  }

  /** The current key's cell in the batch, or -1. */
  _cell() {
    if (batch.prefetched === null || batch.current < 0) return -1;
    if (this._gen !== batch.generation) {
      this.raw; // opened, so the host reads it ahead from now on
      this._gen = batch.generation;
      this._slot = batch.prefetched.states.indexOf(this.name);
    }
    return this._slot < 0 ? -1 : this._slot * batch.keys + batch.current;
  }

  /** The current key's value, or `undefined` when none is set. */
  get() {
    const cell = this._cell();
    if (cell >= 0) {
      const w = batch.latest[cell];
      let bytes, start, end;
      if (w === UNWRITTEN) {
        const p = batch.prefetched;
        if (!p.present[cell]) return undefined;
        bytes = p.values;
        start = cell === 0 ? 0 : p.ends[cell - 1];
        end = p.ends[cell];
      } else {
        if (!batch.present[w]) return undefined;
        bytes = batch.buf;
        start = w === 0 ? 0 : batch.ends[w - 1];
        end = batch.ends[w];
      }
      if (this.codec === Codec.json) {
        const n = jsonInteger(bytes, start, end);
        if (n !== undefined) return n;
      }
      return this.codec.decode(bytes.subarray(start, end));
    }
    const raw = this.raw;
    selected();
    const v = raw.get();
    return v === undefined || v === null ? undefined : this.codec.decode(v);
  }

  /** Replace the current key's value. */
  set(value) {
    const cell = this._cell();
    if (cell < 0) {
      const raw = this.raw;
      selected();
      raw.set(this.codec.encode(value));
      return;
    }
    if (this.codec === Codec.json && Number.isSafeInteger(value)) {
      growWrites(17);
      batch.size = writeInteger(batch.buf, batch.size, value);
    } else {
      const b = this.codec.encode(value);
      growWrites(b.length);
      batch.buf.set(b, batch.size);
      batch.size += b.length;
    }
    this._wrote(cell, true);
  }

  /** Record a write of the current key's cell (its value already in `batch.buf`). */
  _wrote(cell, present) {
    batch.latest[cell] = batch.cells.length;
    batch.cells.push([this._slot, batch.current]);
    batch.present.push(present);
    batch.ends.push(batch.size);
  }

  /** Remove the current key's value. */
  clear() {
    const cell = this._cell();
    if (cell >= 0) return this._wrote(cell, false);
    const raw = this.raw;
    selected();
    raw.clear();
  }
}

/** The JSON integer in `bytes[start, end)` (digits, optional '-', at most 15 digits), else undefined. */
function jsonInteger(bytes, start, end) {
  let i = start;
  let negative = false;
  if (i < end && bytes[i] === 45) {
    negative = true;
    i++;
  }
  if (i === end || end - i > 15) return undefined;
  let n = 0;
  for (; i < end; i++) {
    const d = bytes[i] - 48;
    if (d < 0 || d > 9) return undefined;
    n = n * 10 + d;
  }
  if (end - start > 1 && bytes[negative ? start + 1 : start] === 48) return undefined; // leading zero: not JSON
  return negative ? -n : n;
}

/** Write the safe integer `value` as JSON digits at `at` of `buf`; the end. */
function writeInteger(buf, at, value) {
  if (value < 0) {
    buf[at++] = 45;
    value = -value;
  }
  let digits = 1;
  for (let v = value; v >= 10; v = Math.floor(v / 10)) digits++;
  let i = at + digits;
  const end = i;
  do {
    const q = Math.floor(value / 10);
    buf[--i] = 48 + (value - q * 10);
    value = q;
  } while (value > 0);
  return end;
}

/** A map of user keys to values per key (one host call per operation). */export class MapState extends Handle {
  /**
   * @param name the state's name (1 to 255 bytes)
   * @param opts `ttl`, `codec` for values and `keyCodec` for user keys (JSON by default)
   */
  constructor(name, opts = undefined) {
    super(name, opts, 'openMap');
    this.keyCodec = (opts && opts.keyCodec) || Codec.json;
  }

  /** The value under `key`, or `undefined`. */
  get(key) {
    const raw = this.raw;
    selected();
    const v = raw.get(this.keyCodec.encode(key));
    return v === undefined || v === null ? undefined : this.codec.decode(v);
  }

  /** Store `value` under `key`. */
  put(key, value) {
    const raw = this.raw;
    selected();
    raw.put(this.keyCodec.encode(key), this.codec.encode(value));
  }

  /** Remove `key`. */
  remove(key) {
    const raw = this.raw;
    selected();
    raw.remove(this.keyCodec.encode(key));
  }

  /** Whether `key` has a value. */
  has(key) {
    const raw = this.raw;
    selected();
    return raw.contains(this.keyCodec.encode(key));
  }

  /** Every entry, in the byte order of the encoded keys (paged, 1024 at a time). */
  entries() {
    const raw = this.raw;
    selected();
    const out = [];
    let after = undefined;
    for (;;) {
      const page = raw.entries(after, 1024);
      for (const [k, v] of page) out.push([this.keyCodec.decode(k), this.codec.decode(v)]);
      if (page.length < 1024) return out;
      after = page[page.length - 1][0];
    }
  }

  /** Every user key. */
  keys() {
    return this.entries().map(([k]) => k);
  }

  /** Whether the map has no entries. */
  isEmpty() {
    const raw = this.raw;
    selected();
    return raw.isEmpty();
  }

  /** Remove every entry. */
  clear() {
    const raw = this.raw;
    selected();
    raw.clear();
  }
}

/** An append-mostly list of values per key (one host call per operation). */
export class ListState extends Handle {
  /**
   * @param name the state's name (1 to 255 bytes)
   * @param opts `ttl` and `codec` (JSON by default)
   */
  constructor(name, opts = undefined) {
    super(name, opts, 'openList');
  }

  /** Append `value`. */
  add(value) {
    const raw = this.raw;
    selected();
    raw.add(this.codec.encode(value));
  }

  /** Append `values` in order (one host call). */
  addAll(values) {
    const raw = this.raw;
    selected();
    raw.addAll(Array.from(values, (v) => this.codec.encode(v)));
  }

  /** Every value, oldest first. */
  get() {
    const raw = this.raw;
    selected();
    return raw.get().map((b) => this.codec.decode(b));
  }

  /** Replace the whole list. */
  update(values) {
    const raw = this.raw;
    selected();
    raw.update(Array.from(values, (v) => this.codec.encode(v)));
  }

  /** Remove every value. */
  clear() {
    const raw = this.raw;
    selected();
    raw.clear();
  }
}
