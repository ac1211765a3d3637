// The host the SDK talks to, and the state of the call in progress.
// Internal: not part of the public API.

/** The injected host (the Wasm imports, or the in-memory test host). */
export let host = null;

/** Install `h` as the host every state handle, timer and emit goes to. */
export function installHost(h) {
  host = h;
  batch.generation++;
}

const UNWRITTEN = -1;

/**
 * The call in progress, as far as state is concerned (as the Rust SDK's
 * host/wasm.rs): which key the function is on, which key the host has
 * selected, the value states the host read ahead and the writes to send
 * back with one `write-values` at the end of the call.
 */
export const batch = {
  generation: 0,
  /** Key index the function is on (-1: none). */
  current: -1,
  /** Key index the host has selected (-1: none). */
  selected: -1,
  /** Keys in the batch. */
  keys: 0,
  /** Read-ahead value cells, or null outside `process`. */
  prefetched: null,
  /** Per prefetched cell, the index of its latest write (-1: none). */
  latest: [],
  /** Writes: [state, key] cells, presence, and the values back to back in `buf`. */
  cells: [],
  present: [],
  buf: new Uint8Array(4096),
  size: 0,
  ends: [],
};

/** Make room for `n` more bytes of written values. */
export function growWrites(n) {
  const need = batch.size + n;
  if (need <= batch.buf.length) return;
  let cap = batch.buf.length * 2;
  while (cap < need) cap *= 2;
  const buf = new Uint8Array(cap);
  buf.set(batch.buf.subarray(0, batch.size));
  batch.buf = buf;
}

/** A call begins; `prefetched` holds the host's read-ahead values. */
export function beginBatch(prefetched, keys) {
  batch.generation++;
  batch.current = -1;
  batch.selected = -1;
  batch.keys = keys;
  const cells = prefetched ? prefetched.states.length * keys : 0;
  batch.latest = cells ? new Array(cells).fill(UNWRITTEN) : [];
  batch.prefetched = prefetched;
  batch.cells = [];
  batch.present = [];
  batch.size = 0;
  batch.ends = [];
}

/** The call ends: send the buffered value writes (one host call). */
export function endBatch() {
  const prefetched = batch.prefetched;
  batch.prefetched = null;
  batch.current = -1;
  batch.selected = -1;
  if (batch.cells.length === 0) return;
  const { cells, present } = batch;
  const bytes = batch.buf.slice(0, batch.size);
  const ends = Uint32Array.from(batch.ends);
  batch.cells = [];
  batch.present = [];
  batch.size = 0;
  batch.ends = [];
  host.writeValues(cells, { states: prefetched ? prefetched.states : [], present, values: bytes, ends });
}

/** Make sure the host has the current key selected before a state call. */
export function selected() {
  if (batch.current >= 0 && batch.selected !== batch.current) {
    host.selectKey(batch.current);
    batch.selected = batch.current;
  }
}

/** Cell `i` of packed value cells: a Uint8Array, or null when absent. */
export function cellValue(cells, i) {
  if (!cells.present[i]) return null;
  const start = i === 0 ? 0 : cells.ends[i - 1];
  return cells.values.subarray(start, cells.ends[i]);
}

export { UNWRITTEN };
