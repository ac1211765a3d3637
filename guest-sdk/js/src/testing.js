// A native test harness: runs a function's SDK code against an in-memory
// host, as the Rust SDK's `weir_sdk::testing::Harness`.

import { installHost } from './scope.js';
import { NativeHost, hex } from './native-host.js';
import { Event, EventPacker, PackedEvents, bytes, text, packKeys } from './event.js';
import { Codec } from './state.js';
import * as run from './runtime.js';

function events(list) {
  const p = new EventPacker(256);
  for (const e of list) p.pushEvent(e instanceof Event ? e : new Event(e.value, e.timestamp ?? 0, e));
  return p.finish();
}

function unpack(b) {
  const packed = new PackedEvents(b);
  const out = [];
  for (let i = 0; i < packed.length; i++) {
    const e = packed.event(i);
    e.value = e.value.slice();
    out.push(e);
  }
  return out;
}

/**
 * Runs a function natively with an in-memory host: keys, process batches,
 * timers, window aggregates, state and side outputs.
 */
export class Harness {
  /** @param fn the function's class (instantiated with no arguments) or an instance */
  constructor(fn) {
    this.function = typeof fn === 'function' ? new fn() : fn;
    this.host = new NativeHost();
  }

  _call(f) {
    installHost(this.host);
    return f();
  }

  _take() {
    const out = [];
    for (const b of this.host.outputs) out.push(...unpack(b));
    this.host.outputs = [];
    return out;
  }

  /** The key of `event` (bytes). */
  key(event) {
    return this._call(() => {
      const keys = run.extractKeys(this.function, events([event]));
      return keys.bytes.slice(0, keys.ends[0]);
    });
  }

  /** The key of `event` decoded as UTF-8. */
  keyText(event) {
    return text(this.key(event));
  }

  /** Process `events` of `key` (a string or bytes) as one batch; the outputs. */
  process(key, list) {
    return this._call(() => {
      const k = bytes(key);
      const packedEvents = events(list);
      run.process(this.function, {
        keys: packKeys([k]),
        eventEnds: Uint32Array.of(packedEvents.valueEnds.length),
        events: packedEvents,
        prefetched: this.host.prefetch([k]),
      });
      return this._take();
    });
  }

  _fire(domain, now) {
    const out = [];
    for (;;) {
      const due = this.host.due(domain, now);
      if (due.length === 0) return out;
      // Per key, its timers in timestamp order (keys in order of their first timer).
      const byKey = new Map();
      for (const t of due) {
        const id = hex(t.key);
        if (!byKey.has(id)) byKey.set(id, { key: t.key, timers: [] });
        byKey.get(id).timers.push({ timestamp: BigInt(t.timestamp), domain });
      }
      this._call(() => run.onTimers(this.function, [...byKey.values()]));
      out.push(...this._take());
    }
  }

  /** Set the watermark without firing timers. */
  setWatermark(ms) {
    this.host.watermark = ms;
  }

  /** Set processing time without firing timers. */
  setProcessingTime(ms) {
    this.host.time = ms;
  }

  /** Move the watermark to `ms` and fire the event-time timers due; their outputs. */
  advanceWatermark(ms) {
    this.host.watermark = ms;
    return this._fire('event-time', ms);
  }

  /** Move processing time to `ms` and fire the processing-time timers due; their outputs. */
  advanceProcessingTime(ms) {
    this.host.time = ms;
    return this._fire('processing-time', ms);
  }

  /** Timers not fired yet: `{domain, timestamp, key}`, in timestamp order. */
  pendingTimers() {
    return [...this.host.timers.values()].sort((a, b) => a.timestamp - b.timestamp);
  }

  /** The value of value state `name` of `key`, decoded with `codec` (JSON by default). */
  value(key, name, codec = Codec.json) {
    const e = this.host.store(name).get(hex(bytes(key)));
    const v = e && this.host.live(name, e, false);
    return v === undefined ? undefined : codec.decode(v);
  }

  /** Take the events sent to side output `name` so far. */
  takeSideOutput(name) {
    const out = this.host.sideOutputs.get(name) || [];
    this.host.sideOutputs.delete(name);
    return out;
  }

  /** Log lines written so far: `[level, message]`. */
  get logs() {
    return this.host.logs.slice();
  }

  /** Host calls made so far, by name (to check the batching). */
  get hostCalls() {
    return Object.fromEntries(this.host.calls);
  }

  /** Aggregate `events` of `key` into a new accumulator and return the window's outputs. */
  aggregate(key, window, list) {
    return this._call(() => {
      const k = bytes(key);
      const packedEvents = events(list);
      const accs = run.aggregateAdd(this.function, {
        accumulators: { states: [], present: [], values: new Uint8Array(0), ends: new Uint32Array(0) },
        eventEnds: Uint32Array.of(packedEvents.valueEnds.length),
        events: packedEvents,
      });
      const out = run.aggregateResults(this.function, {
        keys: packKeys([k]),
        windows: [{ start: BigInt(window.start), end: BigInt(window.end) }],
        accumulators: accs.values,
        accumulatorEnds: accs.ends,
      });
      return unpack(out);
    });
  }

  /** The accumulator after folding `events` into `accumulator` (a new one when undefined). */
  accumulate(list, accumulator = undefined) {
    return this._call(() => {
      const codec = this.function.accumulatorCodec || Codec.json;
      const packedEvents = events(list);
      const present = accumulator !== undefined;
      const values = present ? codec.encode(accumulator) : new Uint8Array(0);
      const accs = run.aggregateAdd(this.function, {
        accumulators: { states: [], present: [present], values, ends: Uint32Array.of(values.length) },
        eventEnds: Uint32Array.of(packedEvents.valueEnds.length),
        events: packedEvents,
      });
      return codec.decode(accs.values);
    });
  }

  /** Run `transform` over `events`; the outputs. */
  transform(list) {
    return this._call(() => unpack(run.transform(this.function, events(list))));
  }
}

export { Event };
