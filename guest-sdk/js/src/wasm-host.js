// The host inside a component: calls to the WIT imports. Only the entry
// that `weir-build` generates imports this module (native tests never do).

import { selectKey, writeValues, ValueState, MapState, ListState } from 'weir:function/state@0.2.0';
import { register, delete as deleteTimer } from 'weir:function/timers@0.2.0';
import { emitBatch, emitTo, currentWatermark, processingTime, log } from 'weir:function/context@0.2.0';

function stateError(e) {
  const p = e && e.payload;
  if (!p || typeof p.tag !== 'string') return e;
  switch (p.tag) {
    case 'invalid-name':
      return new Error(`invalid state name ${JSON.stringify(p.val)}`);
    case 'invalid-ttl':
      return new Error('a time to live must be at least a millisecond');
    case 'too-large':
      return new Error(`state key or value larger than the host's limit of ${p.val} bytes`);
    case 'no-current-key':
      return new Error('state used outside of `process`');
    case 'unknown-key':
      return new Error(`key index ${p.val} is not in the current batch`);
    case 'backend':
      return new Error(`state backend: ${p.val}`);
    default:
      return new Error(`state error ${p.tag}`);
  }
}

function call(f) {
  try {
    return f();
  } catch (e) {
    throw stateError(e);
  }
}

function wttl(ttl) {
  return ttl ? { millis: BigInt(ttl.millis), update: ttl.update } : undefined;
}

/** A handle whose methods map state errors to messages. */
function wrap(handle, methods) {
  const out = {};
  for (const m of methods) out[m] = (...args) => call(() => handle[m](...args));
  return out;
}

export const wasmHost = {
  selectKey: (index) => call(() => selectKey(index)),
  writeValues: (cells, writes) => call(() => writeValues(cells, writes)),
  openValue: (name, ttl) => wrap(call(() => ValueState.open(name, wttl(ttl))), ['get', 'set', 'clear']),
  openMap: (name, ttl) =>
    wrap(call(() => MapState.open(name, wttl(ttl))), ['get', 'put', 'remove', 'contains', 'entries', 'isEmpty', 'clear']),
  openList: (name, ttl) => wrap(call(() => ListState.open(name, wttl(ttl))), ['add', 'addAll', 'get', 'update', 'clear']),
  registerTimer: (domain, ts) => call(() => register(domain, BigInt(ts))),
  deleteTimer: (domain, ts) => call(() => deleteTimer(domain, BigInt(ts))),
  emitBatch: (b) => emitBatch(b),
  emitTo: (name, e) =>
    emitTo(name, {
      key: e.key === undefined || e.key === null ? undefined : e.key,
      value: e.value,
      timestamp: BigInt(e.timestamp),
      headers: e.headers || [],
    }),
  currentWatermark: () => Number(currentWatermark()),
  processingTime: () => Number(processingTime()),
  log: (level, message) => log(level, message),
};
