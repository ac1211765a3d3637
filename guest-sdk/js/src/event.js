// Events, event lists over packed batches, text helpers.

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** UTF-8 bytes of `text` (bytes are returned as they are). */
export function bytes(text) {
  return typeof text === 'string' ? encoder.encode(text) : text;
}

/** `bytes` decoded as UTF-8. */
export function text(bytes) {
  return typeof bytes === 'string' ? bytes : decoder.decode(bytes);
}

/** One record flowing through a pipeline. */
export class Event {
  /**
   * @param value payload (a string is encoded as UTF-8)
   * @param timestamp event time, ms since the epoch
   * @param options source `key` and `headers`
   */
  constructor(value, timestamp = 0, options = undefined) {
    this.value = bytes(value);
    this.timestamp = timestamp;
    this.key = options && options.key !== undefined ? bytes(options.key) : undefined;
    this.headers = options && options.headers ? options.headers.map(([n, v]) => [n, bytes(v)]) : [];
  }

  /** An event whose value is `value` serialized with `toJson`. */
  static fromJson(value, timestamp = 0, options = undefined) {
    return new Event(toJson(value), timestamp, options);
  }

  /** The value decoded as UTF-8. */
  text() {
    return decoder.decode(this.value);
  }

  /** The value parsed as JSON. */
  json() {
    return JSON.parse(decoder.decode(this.value));
  }

  /** The first header called `name`, if any. */
  header(name) {
    for (const [n, v] of this.headers) if (n === name) return v;
    return undefined;
  }
}

/**
 * The events of one key (or window, or call), a view over the packed batch
 * the host sent: `at(i)` and iteration build `Event`s on demand; the raw
 * accessors (`data`, `start`, `end`, `timestampOf`) read the packed bytes
 * without creating any object, for hot paths.
 */
export class EventList {
  constructor(packed, from, to) {
    this.packed = packed;
    this.from = from;
    this.length = to - from;
    /** All values of the batch, back to back (raw access). */
    this.bytes = packed.values;
  }

  /** Event `i` of the list (0-based). */
  at(i) {
    if (i < 0) i += this.length;
    if (i < 0 || i >= this.length) return undefined;
    return this.packed.event(this.from + i);
  }

  *[Symbol.iterator]() {
    for (let i = 0; i < this.length; i++) yield this.packed.event(this.from + i);
  }

  /** The events as an array. */
  toArray() {
    return Array.from(this);
  }

  /** Call `f` on every event. */
  forEach(f) {
    for (let i = 0; i < this.length; i++) f(this.packed.event(this.from + i), i);
  }

  /** `f` of every event, as an array. */
  map(f) {
    const out = new Array(this.length);
    for (let i = 0; i < this.length; i++) out[i] = f(this.packed.event(this.from + i), i);
    return out;
  }

  /** A DataView over `bytes` (raw access). */
  get data() {
    return this.packed.dataView();
  }

  /** Offset in `bytes` where event `i`'s value starts. */
  start(i) {
    const j = this.from + i;
    return j === 0 ? 0 : this.packed.valueEnds[j - 1];
  }

  /** Offset in `bytes` where event `i`'s value ends. */
  end(i) {
    return this.packed.valueEnds[this.from + i];
  }

  /** The index of the first event in the packed batch (raw access). */
  get first() {
    return this.from;
  }

  /** Event `i`'s timestamp as the host sent it (a BigInt; raw access). */
  timestampOf(i) {
    return this.packed.timestamps[this.from + i];
  }
}

/** An event batch as the host packs it (WIT `event-batch`). */
export class PackedEvents {
  constructor(batch) {
    this.values = batch.values;
    this.valueEnds = batch.valueEnds;
    this.timestamps = batch.timestamps;
    this.keyed = batch.keyed;
    this.keys = batch.keys;
    this.keyEnds = batch.keyEnds;
    this.headers = batch.headers;
    this._view = null;
    this._keyOf = null;
    this._headersOf = null;
    this._words = null;
  }

  get length() {
    return this.valueEnds.length;
  }

  dataView() {
    const v = this.values;
    return this._view || (this._view = new DataView(v.buffer, v.byteOffset, v.byteLength));
  }

  /** The timestamps as (low, high) 32-bit words. */
  stampWords() {
    const t = this.timestamps;
    if (!this._words) {
      this._words =
        t.byteOffset % 4 === 0
          ? new Int32Array(t.buffer, t.byteOffset, t.length * 2)
          : new Int32Array(new BigInt64Array(t).buffer);
    }
    return this._words;
  }

  list(from = 0, to = this.valueEnds.length) {
    return new EventList(this, from, to);
  }

  event(i) {
    const start = i === 0 ? 0 : this.valueEnds[i - 1];
    const e = new Event(this.values.subarray(start, this.valueEnds[i]), Number(this.timestamps[i]));
    if (this.keyed.length > 0) {
      if (!this._keyOf) {
        this._keyOf = new Map();
        for (let k = 0; k < this.keyed.length; k++) {
          const s = k === 0 ? 0 : this.keyEnds[k - 1];
          this._keyOf.set(this.keyed[k], this.keys.subarray(s, this.keyEnds[k]));
        }
      }
      e.key = this._keyOf.get(i);
    }
    if (this.headers.length > 0) {
      if (!this._headersOf) {
        this._headersOf = new Map();
        for (const [at, name, value] of this.headers) {
          let list = this._headersOf.get(at);
          if (!list) this._headersOf.set(at, (list = []));
          list.push([name, value]);
        }
      }
      e.headers = this._headersOf.get(i) || [];
    }
    return e;
  }
}

const TWO_32 = 4294967296;

/** Packs events (outputs, or test inputs) into a WIT `event-batch`. */
export class EventPacker {
  constructor(capacity = 256) {
    this.buf = new Uint8Array(capacity);
    this.view = new DataView(this.buf.buffer);
    this.size = 0;
    this.length = 0;
    this.ends = new Uint32Array(64);
    // Timestamps as (low, high) 32-bit words: no BigInt per output.
    this.stamps = new Int32Array(128);
    this.keyed = [];
    this.keyBytes = [];
    this.headers = [];
  }

  /** Make room for `n` more bytes. */
  grow(n) {
    const need = this.size + n;
    if (need <= this.buf.length) return;
    let cap = this.buf.length * 2;
    while (cap < need) cap *= 2;
    const buf = new Uint8Array(cap);
    buf.set(this.buf.subarray(0, this.size));
    this.buf = buf;
    this.view = new DataView(buf.buffer);
  }

  /** Append an output of `n` bytes, timestamp not set yet; its index. */
  _append(n) {
    if (this.size + n > this.buf.length) this.grow(n);
    const i = this.length;
    if (i === this.ends.length) {
      const ends = new Uint32Array(i * 2);
      ends.set(this.ends);
      this.ends = ends;
      const stamps = new Int32Array(i * 4);
      stamps.set(this.stamps);
      this.stamps = stamps;
    }
    this.size += n;
    this.ends[i] = this.size;
    this.length = i + 1;
    return i;
  }

  /** Append an output of `n` bytes at `timestamp`; its offset in `buf`. */
  reserve(n, timestamp) {
    const i = this._append(n);
    if (typeof timestamp === 'number') {
      const hi = Math.floor(timestamp / TWO_32);
      this.stamps[2 * i] = timestamp - hi * TWO_32;
      this.stamps[2 * i + 1] = hi;
    } else {
      const t = BigInt.asIntN(64, BigInt(timestamp));
      this.stamps[2 * i] = Number(BigInt.asIntN(32, t));
      this.stamps[2 * i + 1] = Number(t >> 32n);
    }
    return this.size - n;
  }

  /** Append an output of `n` bytes at the timestamp of input `j` of `packed`; its offset. */
  reserveAt(n, packed, j) {
    const i = this._append(n);
    const words = packed.stampWords();
    this.stamps[2 * i] = words[2 * j];
    this.stamps[2 * i + 1] = words[2 * j + 1];
    return this.size - n;
  }

  /** Append a value (bytes or string) at `timestamp`. */
  push(value, timestamp) {
    const b = bytes(value);
    const at = this.reserve(b.length, timestamp);
    this.buf.set(b, at);
  }

  /** Append an event (with its source key and headers). */
  pushEvent(e) {
    const i = this.length;
    this.push(e.value, e.timestamp);
    if (e.key !== undefined && e.key !== null) {
      this.keyed.push(i);
      this.keyBytes.push(bytes(e.key));
    }
    const headers = e.headers;
    if (headers && headers.length > 0) {
      for (let h = 0; h < headers.length; h++) this.headers.push([i, headers[h][0], bytes(headers[h][1])]);
    }
  }

  /** The packed batch; the packer is empty afterwards. */
  finish() {
    let keySize = 0;
    for (const k of this.keyBytes) keySize += k.length;
    const keys = new Uint8Array(keySize);
    const keyEnds = new Uint32Array(this.keyBytes.length);
    let at = 0;
    this.keyBytes.forEach((k, i) => {
      keys.set(k, at);
      at += k.length;
      keyEnds[i] = at;
    });
    const n = this.length;
    // Views, not copies: the host's bindings (or the test host) copy them
    // before the packer is used again.
    const out = {
      values: this.buf.subarray(0, this.size),
      valueEnds: this.ends.subarray(0, n),
      timestamps: new BigInt64Array(this.stamps.buffer, 0, n),
      keyed: Uint32Array.from(this.keyed),
      keys,
      keyEnds,
      headers: this.headers,
    };
    this.size = 0;
    this.length = 0;
    this.keyed = [];
    this.keyBytes = [];
    this.headers = [];
    return out;
  }
}

/**
 * Where `keysInto` writes keys: one per event, in order, packed as they
 * come (a WIT `packed-keys`).
 */
export class KeyWriter {
  constructor(capacity = 1024) {
    /** The key buffer (replaced when it grows: read it after `reserve`). */
    this.bytes = new Uint8Array(capacity);
    this.size = 0;
    this.length = 0;
    this.ends = new Uint32Array(256);
  }

  /** Append a key of `n` bytes; its offset in `bytes`, where the caller writes it. */
  reserve(n) {
    const need = this.size + n;
    if (need > this.bytes.length) {
      let cap = this.bytes.length * 2;
      while (cap < need) cap *= 2;
      const b = new Uint8Array(cap);
      b.set(this.bytes.subarray(0, this.size));
      this.bytes = b;
    }
    const i = this.length;
    if (i === this.ends.length) {
      const ends = new Uint32Array(i * 2);
      ends.set(this.ends);
      this.ends = ends;
    }
    const at = this.size;
    this.size = need;
    this.ends[i] = need;
    this.length = i + 1;
    return at;
  }

  /** Append a key: text (UTF-8) or bytes. */
  push(key) {
    const b = typeof key === 'string' ? encoder.encode(key) : key;
    this.bytes.set(b, this.reserve(b.length));
  }

  /** The packed keys. */
  finish() {
    return { bytes: this.bytes.subarray(0, this.size), ends: this.ends.subarray(0, this.length) };
  }
}

/** Pack byte strings as a WIT `packed-keys`. */
export function packKeys(list) {
  let size = 0;
  for (const k of list) size += k.length;
  const out = new Uint8Array(size);
  const ends = new Uint32Array(list.length);
  let at = 0;
  for (let i = 0; i < list.length; i++) {
    out.set(list[i], at);
    at += list[i].length;
    ends[i] = at;
  }
  return { bytes: out, ends };
}

/** The byte strings of a WIT `packed-keys` (subarrays, no copy). */
export function unpackKeys(packed) {
  const out = new Array(packed.ends.length);
  let s = 0;
  for (let i = 0; i < out.length; i++) {
    out[i] = packed.bytes.subarray(s, packed.ends[i]);
    s = packed.ends[i];
  }
  return out;
}

// Imported last: toJson lives with Cents (it writes Cents as raw numbers).
import { toJson } from './money.js';
