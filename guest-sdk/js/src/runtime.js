// Runs a function for batches from the host: the glue between the WIT
// exports (or the test harness) and the user's class. Internal.

import { host, batch, beginBatch, endBatch, selected } from './scope.js';
import { PackedEvents, EventPacker, Event, KeyWriter, bytes, unpackKeys } from './event.js';
import { Context } from './context.js';
import { Codec } from './state.js';
import { ROLES } from './roles.js';

/**
 * What this SDK does for each role, in the order {@link rolesOf} lists
 * them: the methods that make an object play it, how the build asks for
 * them, and the functions of its WIT export. Which roles exist and what
 * they export are the rows of wit/roles.toml (`roles.js`).
 */
const KINDS = [
  {
    role: 'key',
    methods: ['key'],
    wanted: 'key(event)',
    exports: (fn) => ({ extractKeys: (events) => extractKeys(fn, events) }),
  },
  {
    role: 'process',
    methods: ['process'],
    wanted: 'process(key, events, ctx)',
    exports: (fn) => ({ process: (b) => process(fn, b), onTimers: (list) => onTimers(fn, list) }),
  },
  {
    role: 'aggregate',
    methods: ['add', 'result'],
    wanted: 'add(acc, event) + result(key, window, acc) (an aggregate)',
    exports: (fn) => ({
      add: (b) => aggregateAdd(fn, b),
      merge: (a, b) => aggregateMerge(fn, a, b),
      results: (b) => aggregateResults(fn, b),
    }),
  },
  {
    role: 'transform',
    methods: ['transform'],
    wanted: 'transform(event, out)',
    exports: (fn) => ({ transform: (events) => transform(fn, events) }),
  },
];

/** The roles a function object implements, from its methods. */
export function rolesOf(fn) {
  return KINDS.filter((k) => k.methods.every((m) => typeof fn[m] === 'function')).map((k) => k.role);
}

/** The WIT export names of roles (from wit/roles.toml). */
export const EXPORTS = Object.fromEntries(
  KINDS.map((k) => {
    const row = ROLES.find((r) => r.name === k.role);
    if (!row) throw new Error(`role ${k.role} is not in src/roles.js (generated from wit/roles.toml)`);
    return [k.role, row.export];
  }),
);

/** The name componentize-js gives an export's object: `key-fn` → `keyFn`. */
export function exportObject(name) {
  return name.replace(/-([a-z0-9])/g, (_, c) => c.toUpperCase());
}

/** What makes an object a function, for messages: `key(event), … or transform(event, out)`. */
export function rolesWanted() {
  const wanted = KINDS.map((k) => k.wanted);
  return wanted.length > 1 ? `${wanted.slice(0, -1).join(', ')} or ${wanted[wanted.length - 1]}` : wanted.join('');
}

/** An error for the host: its message (`function-error`). */
export class FunctionError extends Error {
  constructor(message) {
    super(message);
    this.name = 'FunctionError';
    this.payload = { message };
  }
}

function messageOf(e) {
  if (e instanceof Error) return e.message || String(e);
  if (e && typeof e === 'object' && typeof e.message === 'string') return e.message;
  return String(e);
}

function fail(e) {
  return e instanceof FunctionError ? e : new FunctionError(messageOf(e));
}

const ctx = new Context();

function keyBytes(k) {
  if (typeof k === 'string') return bytes(k);
  if (k instanceof Uint8Array) return k;
  if (ArrayBuffer.isView(k)) return new Uint8Array(k.buffer, k.byteOffset, k.byteLength);
  if (typeof k === 'number' || typeof k === 'bigint') return bytes(String(k));
  throw new Error(`a key function returns a string or a Uint8Array, not ${k === null ? 'null' : k && k.constructor ? k.constructor.name : typeof k}`);
}

/** `key-fn.extract-keys`: one key per event. */
export function extractKeys(fn, events) {
  try {
    const packed = new PackedEvents(events);
    const n = packed.length;
    const out = new KeyWriter(n * 8 + 16);
    if (typeof fn.keysInto === 'function') {
      fn.keysInto(packed.list(), out);
      if (out.length !== n) throw new Error(`keysInto wrote ${out.length} keys for ${n} events`);
    } else {
      for (let i = 0; i < n; i++) out.push(keyBytes(fn.key(packed.event(i))));
    }
    return out.finish();
  } catch (e) {
    throw fail(e);
  }
}

/** Run `handle(key, events, ctx)` per key of a `keyed-batch`. */
function runKeyed(b, fn, method) {
  const keys = unpackKeys(b.keys);
  beginBatch(b.prefetched, keys.length);
  if (host.batchKeys) host.batchKeys(keys);
  let error = null;
  try {
    const packed = new PackedEvents(b.events);
    let from = 0;
    for (let k = 0; k < keys.length; k++) {
      const to = b.eventEnds[k];
      batch.current = k;
      fn[method](keys[k], packed.list(from, to), ctx);
      from = to;
    }
    ctx.flush();
  } catch (e) {
    error = e;
  }
  endKeyedCall(error);
}

/**
 * End a keyed call: on `error`, drop its outputs and tell the host the key
 * (so its error names it); send the buffered state writes (kept even when
 * the call failed, as without read-ahead); throw the first failure.
 */
function endKeyedCall(error) {
  if (error) {
    ctx.reset();
    try {
      selected();
    } catch (_) {
      /* keep the first error */
    }
  }
  try {
    endBatch();
  } catch (e) {
    error = error || e;
  }
  if (error) throw fail(error);
}

/** `process-fn.process`. */
export function process(fn, b) {
  runKeyed(b, fn, 'process');
}

/** `process-fn.on-timers`: fired timers per key. */
export function onTimers(fn, list) {
  const keys = list.map((t) => t.key);
  beginBatch(null, keys.length);
  if (host.batchKeys) host.batchKeys(keys);
  let error = null;
  try {
    for (let k = 0; k < list.length; k++) {
      batch.current = k;
      for (const t of list[k].timers) {
        if (typeof fn.onTimer === 'function') {
          fn.onTimer(list[k].key, { timestamp: Number(t.timestamp), domain: t.domain }, ctx);
        }
      }
    }
    ctx.flush();
  } catch (e) {
    error = e;
  }
  endKeyedCall(error);
}

function codecOf(fn) {
  return fn.accumulatorCodec || Codec.json;
}

function initial(fn) {
  return typeof fn.createAccumulator === 'function' ? fn.createAccumulator() : 0;
}

/** `aggregate-fn.add`: fold each window's events into its accumulator. */
export function aggregateAdd(fn, b) {
  try {
    const codec = codecOf(fn);
    const packed = new PackedEvents(b.events);
    const cells = b.accumulators;
    const n = b.eventEnds.length;
    const parts = new Array(n);
    const present = new Array(n);
    const ends = new Uint32Array(n);
    let from = 0;
    let size = 0;
    let vs = 0;
    for (let w = 0; w < n; w++) {
      const ve = w < cells.ends.length ? cells.ends[w] : vs;
      let acc = w < cells.present.length && cells.present[w] ? codec.decode(cells.values.subarray(vs, ve)) : initial(fn);
      vs = ve;
      const to = b.eventEnds[w];
      for (let i = from; i < to; i++) acc = fn.add(acc, packed.event(i));
      from = to;
      const enc = codec.encode(acc);
      parts[w] = enc;
      present[w] = true;
      size += enc.length;
      ends[w] = size;
    }
    const values = new Uint8Array(size);
    let at = 0;
    for (const p of parts) {
      values.set(p, at);
      at += p.length;
    }
    return { states: [], present, values, ends };
  } catch (e) {
    throw fail(e);
  }
}

/** `aggregate-fn.merge`. */
export function aggregateMerge(fn, a, b) {
  try {
    const codec = codecOf(fn);
    if (typeof fn.merge !== 'function') throw new Error('this aggregate function does not implement merge');
    return codec.encode(fn.merge(codec.decode(a), codec.decode(b)));
  } catch (e) {
    throw fail(e);
  }
}

/** `aggregate-fn.results`: the outputs of finished windows. */
export function aggregateResults(fn, b) {
  try {
    const codec = codecOf(fn);
    const keys = unpackKeys(b.keys);
    const out = new EventPacker(256);
    let s = 0;
    for (let w = 0; w < keys.length; w++) {
      const e = b.accumulatorEnds[w];
      const acc = codec.decode(b.accumulators.subarray(s, e));
      s = e;
      const win = b.windows[w];
      const window = { start: Number(win.start), end: Number(win.end) };
      pushOutputs(out, fn.result(keys[w], window, acc));
    }
    return out.finish();
  } catch (e) {
    throw fail(e);
  }
}

function pushOutputs(out, result) {
  if (result === undefined || result === null) return;
  if (result instanceof Event) return out.pushEvent(result);
  for (const e of result) {
    if (!(e instanceof Event)) throw new Error('a result is an Event or an array of Events');
    out.pushEvent(e);
  }
}

/** Collects a transform's outputs. */
class Emitter {
  constructor(out) {
    this.out = out;
  }
  /** Emit an `Event`, or a value (bytes or string) at `timestamp`. */
  emit(value, timestamp = undefined) {
    if (value instanceof Event) {
      if (timestamp !== undefined) value = new Event(value.value, timestamp, value);
      this.out.pushEvent(value);
    } else {
      this.out.push(value, timestamp);
    }
  }
  /** Send `event` to the side output `name`. */
  emitTo(name, event) {
    host.emitTo(name, event);
  }
}

/** `transform-fn.transform`. */
export function transform(fn, events) {
  try {
    const packed = new PackedEvents(events);
    const out = new EventPacker(1024);
    const emitter = new Emitter(out);
    for (let i = 0; i < packed.length; i++) fn.transform(packed.event(i), emitter);
    return out.finish();
  } catch (e) {
    throw fail(e);
  }
}

/**
 * The WIT exports for `fn` (an instance of the user's class): `keyFn`,
 * `processFn`, `aggregateFn`, `transformFn` for the roles it implements.
 */
export function exportsFor(fn) {
  const out = {};
  for (const kind of KINDS) {
    if (kind.methods.every((m) => typeof fn[m] === 'function')) out[exportObject(EXPORTS[kind.role])] = kind.exports(fn);
  }
  return out;
}
