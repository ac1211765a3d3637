// An in-memory host for native tests: keyed state, timers, clocks,
// outputs. It is driven by the test harness; the SDK code it serves is
// the same that runs in the component.

const hex = (b) => Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString('hex');

function compareBytes(a, b) {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return a[i] - b[i];
  return a.length - b.length;
}

/** In-memory keyed state, timers and outputs. */
export class NativeHost {
  constructor() {
    /** state name -> Map(key hex -> {value, ...}) */
    this.stores = new Map();
    /** value states opened (the host reads them ahead) and their TTLs */
    this.valueStates = new Map();
    this.ttls = new Map();
    this.keys = [];
    this.selectedKey = null;
    /** Map("domain/ts/keyhex" -> {domain, timestamp, key}) */
    this.timers = new Map();
    this.watermark = Number(-(2n ** 63n));
    this.time = 0;
    this.outputs = [];
    this.sideOutputs = new Map();
    this.logs = [];
    /** host calls, by name (for tests of the batching) */
    this.calls = new Map();
  }

  count(name) {
    this.calls.set(name, (this.calls.get(name) || 0) + 1);
  }

  batchKeys(keys) {
    this.keys = keys;
    this.selectedKey = null;
  }

  selectKey(index) {
    this.count('selectKey');
    if (index < 0 || index >= this.keys.length) throw new Error(`key index ${index} is not in the current batch`);
    this.selectedKey = this.keys[index];
  }

  current() {
    if (this.selectedKey === null) throw new Error('state used outside of `process`');
    return hex(this.selectedKey);
  }

  store(name) {
    let s = this.stores.get(name);
    if (!s) this.stores.set(name, (s = new Map()));
    return s;
  }

  /** An entry's value unless expired (renewed on read when the TTL says so). */
  live(name, entry, read) {
    if (!entry) return undefined;
    const ttl = this.ttls.get(name);
    if (ttl) {
      if (this.time - entry.touched >= ttl.millis) return undefined;
      if (read && ttl.update === 'on-read-and-write') entry.touched = this.time;
    }
    return entry.value;
  }

  put(name, key, value) {
    this.store(name).set(key, { value: value.slice(), touched: this.time });
  }

  checkName(name, ttl) {
    if (name.length === 0 || Buffer.byteLength(name) > 255) throw new Error(`invalid state name ${JSON.stringify(name)}`);
    if (ttl) this.ttls.set(name, ttl);
  }

  /** The value cells the host reads ahead for `keys` (the opened value states). */
  prefetch(keys) {
    const states = [...this.valueStates.keys()].filter((n) => {
      const ttl = this.ttls.get(n);
      return !(ttl && ttl.update === 'on-read-and-write');
    });
    const present = [];
    const parts = [];
    for (const name of states) {
      for (const k of keys) {
        const v = this.live(name, this.store(name).get(hex(k)), false);
        present.push(v !== undefined);
        parts.push(v || new Uint8Array(0));
      }
    }
    let size = 0;
    for (const p of parts) size += p.length;
    const values = new Uint8Array(size);
    const ends = new Uint32Array(parts.length);
    let at = 0;
    parts.forEach((p, i) => {
      values.set(p, at);
      at += p.length;
      ends[i] = at;
    });
    return { states, present, values, ends };
  }

  writeValues(cells, writes) {
    this.count('writeValues');
    cells.forEach(([s, k], i) => {
      const name = writes.states[s];
      const key = hex(this.keys[k]);
      if (writes.present[i]) {
        const start = i === 0 ? 0 : writes.ends[i - 1];
        this.put(name, key, writes.values.subarray(start, writes.ends[i]));
      } else {
        this.store(name).delete(key);
      }
    });
  }

  openValue(name, ttl) {
    this.checkName(name, ttl);
    this.valueStates.set(name, true);
    return {
      get: () => {
        this.count('value.get');
        return this.live(name, this.store(name).get(this.current()), true);
      },
      set: (v) => {
        this.count('value.set');
        this.put(name, this.current(), v);
      },
      clear: () => {
        this.count('value.clear');
        this.store(name).delete(this.current());
      },
    };
  }

  /** The map of user keys (hex) of the current key's map state `name`. */
  map(name) {
    const s = this.store(name);
    const k = this.current();
    let e = s.get(k);
    if (!e) s.set(k, (e = { value: new Map(), touched: this.time }));
    return e;
  }

  openMap(name, ttl) {
    this.checkName(name, ttl);
    const live = (entry) => this.live(name, entry, true);
    const entries = () => {
      const m = this.map(name).value;
      for (const [uk, e] of m) if (live(e) === undefined) m.delete(uk);
      return m;
    };
    return {
      get: (uk) => live(this.map(name).value.get(hex(uk))),
      put: (uk, v) => this.map(name).value.set(hex(uk), { key: uk.slice(), value: v.slice(), touched: this.time }),
      remove: (uk) => this.map(name).value.delete(hex(uk)),
      contains: (uk) => live(this.map(name).value.get(hex(uk))) !== undefined,
      entries: (after, limit) => {
        const all = [...entries().values()].sort((a, b) => compareBytes(a.key, b.key));
        const from = after ? all.filter((e) => compareBytes(e.key, after) > 0) : all;
        return from.slice(0, limit).map((e) => [e.key, e.value]);
      },
      isEmpty: () => entries().size === 0,
      clear: () => this.map(name).value.clear(),
    };
  }

  openList(name, ttl) {
    this.checkName(name, ttl);
    const list = () => {
      const s = this.store(name);
      const k = this.current();
      let e = s.get(k);
      if (!e || this.live(name, e, false) === undefined) s.set(k, (e = { value: [], touched: this.time }));
      return e;
    };
    return {
      add: (v) => {
        const e = list();
        e.value.push(v.slice());
        e.touched = this.time;
      },
      addAll: (vs) => {
        const e = list();
        for (const v of vs) e.value.push(v.slice());
        e.touched = this.time;
      },
      get: () => this.live(name, list(), true).slice(),
      update: (vs) => {
        const e = list();
        e.value = vs.map((v) => v.slice());
        e.touched = this.time;
      },
      clear: () => this.store(name).delete(this.current()),
    };
  }

  registerTimer(domain, timestamp) {
    const key = this.selectedKey;
    if (key === null) throw new Error('state used outside of `process`');
    this.timers.set(`${domain}/${timestamp}/${hex(key)}`, { domain, timestamp: Number(timestamp), key: key.slice() });
  }

  deleteTimer(domain, timestamp) {
    const key = this.selectedKey;
    if (key === null) throw new Error('state used outside of `process`');
    this.timers.delete(`${domain}/${timestamp}/${hex(key)}`);
  }

  /** Remove and return the timers of `domain` due at `now`, in timestamp order. */
  due(domain, now) {
    const out = [];
    for (const [id, t] of this.timers) {
      if (t.domain === domain && t.timestamp <= now) {
        out.push(t);
        this.timers.delete(id);
      }
    }
    return out.sort((a, b) => a.timestamp - b.timestamp);
  }

  emitBatch(b) {
    this.count('emitBatch');
    // A copy, as the Wasm boundary makes one: the SDK reuses its buffers.
    this.outputs.push({
      ...b,
      values: b.values.slice(),
      valueEnds: b.valueEnds.slice(),
      timestamps: b.timestamps.slice(),
    });
  }

  emitTo(name, e) {
    let list = this.sideOutputs.get(name);
    if (!list) this.sideOutputs.set(name, (list = []));
    list.push(e);
  }

  currentWatermark() {
    return this.watermark;
  }

  processingTime() {
    return this.time;
  }

  log(level, message) {
    this.logs.push([level, message]);
  }
}

export { hex };
