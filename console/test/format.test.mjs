import assert from 'node:assert/strict';
import { test } from 'node:test';

import {
  MISSING,
  compact,
  describeBytes,
  formatAge,
  formatBytes,
  formatCount,
  formatDuration,
  formatPlacement,
  formatRate,
  formatTime,
  fromBase64,
} from '../src/format.js';

test('rates are short, with three significant digits at most', () => {
  assert.equal(formatRate(0), '0/s');
  assert.equal(formatRate(0.5), '0.5/s');
  assert.equal(formatRate(3.456), '3.46/s');
  assert.equal(formatRate(42.25), '42.3/s');
  assert.equal(formatRate(987.4), '987/s');
  assert.equal(formatRate(12_345), '12.3k/s');
  assert.equal(formatRate(1_500_000), '1.5M/s');
  assert.equal(formatRate(-3), '0/s', 'a rate is never negative');
  assert.equal(compact(2_000_000_000), '2G');
});

test('missing numbers are a dash', () => {
  for (const f of [formatRate, formatDuration, formatBytes, formatCount, formatTime, compact]) {
    assert.equal(f(null), MISSING, f.name);
    assert.equal(f(undefined), MISSING, f.name);
    assert.equal(f(NaN), MISSING, f.name);
  }
  assert.equal(formatAge(1000, null), MISSING);
});

test('durations and lags read like a person would say them', () => {
  assert.equal(formatDuration(0), '0 ms');
  assert.equal(formatDuration(850), '850 ms');
  assert.equal(formatDuration(4200), '4.2 s');
  assert.equal(formatDuration(59_999), '60 s');
  assert.equal(formatDuration(185_000), '3m 05s');
  assert.equal(formatDuration(2 * 3600_000 + 3 * 60_000), '2h 03m');
  assert.equal(formatDuration(26 * 3600_000), '1d 02h');
  assert.equal(formatDuration(-1500), '−1.5 s', 'a watermark ahead of the clock');
  assert.equal(formatAge(10_000, 4_000), '6 s ago');
  assert.equal(formatAge(10_000, 12_000), '0 ms ago', 'clock skew never gives a negative age');
});

test('sizes, counts and times', () => {
  assert.equal(formatBytes(0), '0 B');
  assert.equal(formatBytes(1023), '1023 B');
  assert.equal(formatBytes(1536), '1.5 KiB');
  assert.equal(formatBytes(5 * 1024 * 1024), '5 MiB');
  assert.equal(formatBytes(300 * 1024 * 1024 * 1024), '300 GiB');
  assert.equal(formatCount(1234567), '1,234,567');
  assert.equal(formatCount(12), '12');
  assert.equal(formatTime(1_768_471_205_000), '2026-01-15 10:00:05Z');
});

test('state bytes are shown as hex, text and a postcard varint', () => {
  // postcard stores the i64 4800 as the zigzag varint 9600 = 80 4b.
  const total = describeBytes(fromBase64(Buffer.from([0x80, 0x4b]).toString('base64')));
  assert.equal(total.hex, "80 4b");
  assert.deepEqual(total.varint, { unsigned: '9600', signed: '4800' });
  assert.equal(total.text, null);
  const negative = describeBytes(new Uint8Array([0x03]));
  assert.deepEqual(negative.varint, { unsigned: '3', signed: '-2' });
  const text = describeBytes(new TextEncoder().encode('hello'));
  assert.equal(text.text, 'hello');
  assert.equal(text.varint, null, 'several bytes without continuation bits are no single varint');
  const big = describeBytes(new Uint8Array([0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]));
  assert.deepEqual(big.varint, { unsigned: '18446744073709551615', signed: '-9223372036854775808' });
  assert.equal(describeBytes(new Uint8Array([])).varint, null);
});

test("where a cluster pipeline runs, in words", () => {
  assert.equal(formatPlacement({ units: 4, running: 4, workers: 2, waiting: 0 }), '4 units on 2 workers');
  assert.equal(formatPlacement({ units: 1, running: 1, workers: 1, waiting: 0 }), '1 unit on 1 worker');
  assert.equal(formatPlacement({ units: 4, running: 3, workers: 2, waiting: 1 }), '3 of 4 units running on 2 workers, 1 waiting');
  assert.equal(formatPlacement(null), MISSING);
});
