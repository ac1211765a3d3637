// Formatting of the numbers the console shows: rates, durations, ages,
// sizes, times, and the bytes of a state value. Pure functions, no DOM;
// whatever is missing (null, undefined, NaN) is shown as an em dash.

/** What the console shows for a value the server did not give. */
export const MISSING = '—';

const missing = (v) => v === null || v === undefined || (typeof v === 'number' && !Number.isFinite(v));

/** `12.3k/s`: records per second, three significant digits at most. */
export function formatRate(perSecond) {
  if (missing(perSecond)) return MISSING;
  return `${compact(Math.max(0, perSecond))}/s`;
}

/** `1.23M`, `12.3k`, `987`, `4.5`: a non-negative number, short. */
export function compact(n) {
  if (missing(n)) return MISSING;
  const units = [[1e9, 'G'], [1e6, 'M'], [1e3, 'k']];
  for (const [size, suffix] of units) {
    if (Math.abs(n) >= size) return `${trim(n / size)}${suffix}`;
  }
  if (Number.isInteger(n) || Math.abs(n) >= 100) return String(Math.round(n));
  return trim(n);
}

/** Three significant digits, no trailing zeros: 1.50 → 1.5, 123.4 → 123. */
function trim(n) {
  const digits = Math.abs(n) >= 100 ? 0 : Math.abs(n) >= 10 ? 1 : 2;
  return String(Number(n.toFixed(digits)));
}

/** `1,234,567`: an exact count. */
export function formatCount(n) {
  if (missing(n)) return MISSING;
  return Math.round(n).toString().replace(/\B(?=(\d{3})+(?!\d))/g, ',');
}

/** `850 ms`, `4.2 s`, `3m 05s`, `2h 03m`, `1d 04h`: a duration in ms. */
export function formatDuration(ms) {
  if (missing(ms)) return MISSING;
  const sign = ms < 0 ? '−' : '';
  const a = Math.abs(ms);
  const pad = (x) => String(x).padStart(2, '0');
  if (a < 1000) return `${sign}${Math.round(a)} ms`;
  if (a < 60_000) return `${sign}${Number((a / 1000).toFixed(1))} s`;
  const s = Math.floor(a / 1000);
  if (s < 3600) return `${sign}${Math.floor(s / 60)}m ${pad(s % 60)}s`;
  if (s < 86_400) return `${sign}${Math.floor(s / 3600)}h ${pad(Math.floor(s / 60) % 60)}m`;
  return `${sign}${Math.floor(s / 86_400)}d ${pad(Math.floor(s / 3600) % 24)}h`;
}

/** `12 s ago`: how long before `now` the instant `then` (ms) was. */
export function formatAge(now, then) {
  if (missing(then) || missing(now)) return MISSING;
  return `${formatDuration(Math.max(0, now - then))} ago`;
}

/** `1.5 MiB`: a size in bytes. */
export function formatBytes(n) {
  if (missing(n)) return MISSING;
  if (n < 1024) return `${n} B`;
  const units = ['KiB', 'MiB', 'GiB', 'TiB'];
  let value = n;
  let unit = 'B';
  for (const next of units) {
    if (value < 1024) break;
    value /= 1024;
    unit = next;
  }
  return `${Number(value.toFixed(value >= 100 ? 0 : 1))} ${unit}`;
}

/** `2026-01-15 10:00:05Z`: an instant in ms since the epoch, in UTC. */
export function formatTime(ms) {
  if (missing(ms)) return MISSING;
  const date = new Date(ms);
  if (Number.isNaN(date.getTime())) return MISSING;
  return date.toISOString().replace('T', ' ').replace(/\.\d{3}Z$/, 'Z');
}

/** The bytes of hex `text` (`804b`), or null when it is not hex. */
export function fromHex(text) {
  if (typeof text !== 'string' || text.length % 2 !== 0 || !/^[0-9a-fA-F]*$/.test(text)) return null;
  const bytes = new Uint8Array(text.length / 2);
  for (let i = 0; i < bytes.length; i++) bytes[i] = parseInt(text.slice(2 * i, 2 * i + 2), 16);
  return bytes;
}

/** The bytes of base64 `text`. */
export function fromBase64(text) {
  const binary = atob(text);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

/**
 * Readings of a state value's raw bytes: hex, UTF-8 text (when it is
 * printable text), and — when the bytes are exactly one varint, as the Rust
 * SDK's postcard encoding stores an integer — that integer unsigned and
 * zigzag-decoded (how postcard stores `i64`), as decimal strings.
 */
export function describeBytes(bytes) {
  const hex = Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join(' ');
  let text = null;
  try {
    const decoded = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
    if (decoded.length > 0 && !/[\u0000-\u0008\u000e-\u001f\u007f]/.test(decoded)) text = decoded;
  } catch {
    text = null;
  }
  let varint = null;
  let value = 0n;
  for (let i = 0; i < bytes.length && i < 10; i++) {
    value |= BigInt(bytes[i] & 0x7f) << BigInt(7 * i);
    if ((bytes[i] & 0x80) === 0) {
      if (i === bytes.length - 1) {
        const signed = (value >> 1n) ^ -(value & 1n);
        varint = { unsigned: value.toString(), signed: signed.toString() };
      }
      break;
    }
  }
  return { length: bytes.length, hex, text, varint };
}

/** `4 units on 2 workers`, `3 of 4 units running on 2 workers, 1 waiting`:
 * where a cluster pipeline runs (a `placement`). */
export function formatPlacement(p) {
  if (!p) return MISSING;
  const plural = (n, word) => `${n} ${word}${n === 1 ? '' : 's'}`;
  const units = p.running === p.units ? plural(p.units, 'unit') : `${p.running} of ${plural(p.units, 'unit')} running`;
  const text = `${units} on ${plural(p.workers, 'worker')}`;
  return p.waiting > 0 ? `${text}, ${p.waiting} waiting` : text;
}
