// Types of @weir/sdk. The SDK is plain JavaScript (src/*.js); these are
// its public declarations.

/** UTF-8 bytes of `text` (bytes are returned as they are). */
export function bytes(text: string | Uint8Array): Uint8Array;

/** `bytes` decoded as UTF-8. */
export function text(bytes: Uint8Array | string): string;

/** Options of an event: its source key and headers. */
export interface EventOptions {
  /** The record's key as read from the source (not the pipeline's key). */
  key?: Uint8Array | string;
  /** Extra named byte strings carried with the record. */
  headers?: Array<[string, Uint8Array | string]>;
}

/** One record flowing through a pipeline. */
export class Event {
  /**
   * @param value payload (a string is encoded as UTF-8)
   * @param timestamp event time in ms since the Unix epoch (UTC)
   */
  constructor(value: Uint8Array | string, timestamp?: number, options?: EventOptions);
  /** An event whose value is `value` serialized with {@link toJson}. */
  static fromJson(value: unknown, timestamp?: number, options?: EventOptions): Event;
  /** The payload. */
  value: Uint8Array;
  /** Event time in ms since the epoch. */
  timestamp: number;
  /** The source key, if the record had one. */
  key: Uint8Array | undefined;
  /** Headers: `[name, value]`. */
  headers: Array<[string, Uint8Array]>;
  /** The value decoded as UTF-8. */
  text(): string;
  /** The value parsed as JSON. */
  json<T = any>(): T;
  /** The first header called `name`, if any. */
  header(name: string): Uint8Array | undefined;
}

/**
 * The events of one key (or one call), a view over the packed batch the
 * host sent. Iterating it or `at(i)` builds {@link Event}s on demand; the
 * raw accessors (`bytes`, `data`, `start`, `end`, `timestampOf`) read the
 * packed bytes without creating objects, for hot paths.
 */
export class EventList implements Iterable<Event> {
  /** Number of events. */
  readonly length: number;
  /** Event `i` (negative: from the end), or undefined. */
  at(i: number): Event | undefined;
  [Symbol.iterator](): Iterator<Event>;
  /** The events as an array. */
  toArray(): Event[];
  /** Call `f` on every event. */
  forEach(f: (event: Event, index: number) => void): void;
  /** `f` of every event. */
  map<T>(f: (event: Event, index: number) => T): T[];
  /** All values of the batch, back to back (raw access). */
  readonly bytes: Uint8Array;
  /** A DataView over {@link bytes} (raw access). */
  readonly data: DataView;
  /** Offset in `bytes` where event `i`'s value starts. */
  start(i: number): number;
  /** Offset in `bytes` where event `i`'s value ends. */
  end(i: number): number;
  /** The index of the first event in the packed batch (raw access). */
  readonly first: number;
  /** Event `i`'s timestamp as the host sent it (raw access). */
  timestampOf(i: number): bigint;
}

/**
 * An amount of money in integer cents (a BigInt in the signed 64-bit
 * range), parsed from decimal text exactly, never through floating point.
 *
 * ```ts
 * Cents.parse('0.10').add(Cents.parse('0.20')).toString() // '0.30'
 * ```
 */
export class Cents {
  /** @param cents the amount in cents */
  constructor(cents?: bigint | number);
  /** The amount in cents. */
  readonly cents: bigint;
  /**
   * Parse `20`, `7.5`, `-12.25` (at most two decimals; surrounding quotes
   * ignored): the rules of the Rust SDK's `Cents::parse`. Throws on
   * anything else (`1.234`, `1e3`, `abc`, out of range).
   */
  static parse(text: string): Cents;
  /** From a parsed JSON value: a number, a decimal string, or cents as a BigInt. */
  static from(value: number | string | bigint | Cents): Cents;
  /** The sum (throws when it leaves the signed 64-bit range). */
  add(other: Cents | number | string | bigint): Cents;
  /** The difference (throws when it leaves the signed 64-bit range). */
  sub(other: Cents | number | string | bigint): Cents;
  /** Whether both are the same amount. */
  equals(other: unknown): boolean;
  /** Two decimals: `50.00`, `-0.05`. */
  toString(): string;
  /** The cents as a number (exact below 2^53). */
  toNumber(): number;
  /** In `JSON.stringify`: the decimal as a string ({@link toJson} writes a number). */
  toJSON(): string;
}

/**
 * `value` as compact JSON, like `JSON.stringify` but with {@link Cents}
 * written as decimal numbers with two decimals (`"total":50.00`) and
 * BigInts as integers.
 */
export function toJson(value: unknown): string;

/** How state values and accumulators become bytes. */
export interface StateCodec<T> {
  /** The bytes of `value`. */
  encode(value: T): Uint8Array;
  /** The value of `bytes`. */
  decode(bytes: Uint8Array): T;
}

/**
 * Built-in codecs. The default, `json`, is compact UTF-8 JSON — the same
 * encoding as the Python SDK's, so state stays readable across restores
 * and languages.
 */
export const Codec: {
  /** Compact JSON (the default); Cents and BigInts are written as numbers. */
  readonly json: StateCodec<any>;
  /** JSON integers read back as BigInt. */
  readonly bigint: StateCodec<bigint>;
  /** UTF-8 text. */
  readonly string: StateCodec<string>;
  /** Raw bytes. */
  readonly bytes: StateCodec<Uint8Array>;
};

/** Which accesses renew a value's time to live. */
export type TtlUpdate = 'on-create-and-write' | 'on-read-and-write';

/** A time to live for state, in ms of processing time. */
export class Ttl {
  constructor(millis: number, update?: TtlUpdate);
  readonly millis: number;
  readonly update: TtlUpdate;
  /** Expire `millis` after the last write. */
  static afterWrite(millis: number): Ttl;
  /** Expire `millis` after the last read or write. */
  static afterAccess(millis: number): Ttl;
}

/** Options of a state handle. */
export interface StateOptions<T> {
  /** Time to live (none: kept forever). */
  ttl?: Ttl;
  /** Codec of the values (default: {@link Codec.json}). */
  codec?: StateCodec<T>;
}

/**
 * A single value per key. Reads are served from the values the host sent
 * with the batch and writes are sent back once per call (no host call per
 * event). Create handles once, as fields of the function's class.
 */
export class ValueState<T> {
  constructor(name: string, options?: StateOptions<T>);
  readonly name: string;
  /** The current key's value, or `undefined`. */
  get(): T | undefined;
  /** Replace the current key's value. */
  set(value: T): void;
  /** Remove the current key's value. */
  clear(): void;
}

/** A map of user keys to values per key. */
export class MapState<K, V> {
  constructor(name: string, options?: StateOptions<V> & { keyCodec?: StateCodec<K> });
  readonly name: string;
  /** The value under `key`, or `undefined`. */
  get(key: K): V | undefined;
  /** Store `value` under `key`. */
  put(key: K, value: V): void;
  /** Remove `key`. */
  remove(key: K): void;
  /** Whether `key` has a value. */
  has(key: K): boolean;
  /** Every entry, in byte order of the encoded keys. */
  entries(): Array<[K, V]>;
  /** Every user key, in byte order of the encoded keys. */
  keys(): K[];
  /** Whether the map has no entries. */
  isEmpty(): boolean;
  /** Remove every entry. */
  clear(): void;
}

/** An append-mostly list of values per key. */
export class ListState<T> {
  constructor(name: string, options?: StateOptions<T>);
  readonly name: string;
  /** Append `value`. */
  add(value: T): void;
  /** Append `values` in order (one host call). */
  addAll(values: Iterable<T>): void;
  /** Every value, oldest first. */
  get(): T[];
  /** Replace the whole list. */
  update(values: Iterable<T>): void;
  /** Remove every value. */
  clear(): void;
}

/** Log levels. */
export type LogLevel = 'trace' | 'debug' | 'info' | 'warn' | 'error';
/** Log levels by name. */
export const LogLevel: { readonly trace: 'trace'; readonly debug: 'debug'; readonly info: 'info'; readonly warn: 'warn'; readonly error: 'error' };

/** Which clock a timer follows. */
export type TimeDomain = 'event-time' | 'processing-time';
/** Time domains by name. */
export const TimeDomain: { readonly eventTime: 'event-time'; readonly processingTime: 'processing-time' };

/** A timer that has fired. */
export interface FiredTimer {
  /** The time it was registered for (ms). */
  timestamp: number;
  /** Its clock. */
  domain: TimeDomain;
}

/** A half-open event-time interval `[start, end)` in ms. */
export interface Window {
  start: number;
  end: number;
}

/**
 * Outputs, timers, clocks and logging for one call. Outputs are packed as
 * they come and sent with one `emit-batch` at the end of the call.
 */
export class Context {
  /** Emit an event (at its own timestamp unless one is given). */
  emit(event: Event, timestamp?: number): void;
  /** Emit a value (bytes or UTF-8 text) at `timestamp`. */
  emit(value: Uint8Array | string, timestamp: number | bigint): void;
  /**
   * Reserve an output of `length` bytes at `timestamp`; returns its offset
   * in {@link outputView}/{@link outputBytes}, where the caller writes it.
   * For hot paths: no allocation per output. Valid until the next emit.
   */
  reserve(length: number, timestamp: number | bigint): number;
  /**
   * Reserve an output of `length` bytes at the timestamp of event `i` of
   * `events` (copied as the host sent it, no conversion); its offset in
   * {@link outputView}.
   */
  reserveAt(length: number, events: EventList, i: number): number;
  /** DataView over the output buffer (see {@link reserve}). */
  readonly outputView: DataView;
  /** The output buffer (see {@link reserve}). */
  readonly outputBytes: Uint8Array;
  /** Send `event` to the side output `name` (declared in the pipeline spec). */
  emitTo(name: string, event: Event): void;
  emitTo(name: string, value: Uint8Array | string, timestamp: number): void;
  /** The event-time watermark (ms); before the first one, -2^63. */
  readonly watermark: number;
  /** The host's processing time (ms), fixed for the call. */
  readonly processingTime: number;
  /** Call `onTimer` for the current key once the watermark reaches `timestamp`. */
  registerEventTimeTimer(timestamp: number): void;
  /** Call `onTimer` for the current key once processing time reaches `timestamp`. */
  registerProcessingTimeTimer(timestamp: number): void;
  /** Cancel the current key's event-time timer at `timestamp`. */
  deleteEventTimeTimer(timestamp: number): void;
  /** Cancel the current key's processing-time timer at `timestamp`. */
  deleteProcessingTimeTimer(timestamp: number): void;
  /** Write a line to the host's log. */
  log(level: LogLevel, message: string): void;
}

/** Where a {@link TransformFunction} puts its outputs. */
export interface Emitter {
  /** Emit an event, or a value at `timestamp`. */
  emit(event: Event | Uint8Array | string, timestamp?: number): void;
  /** Send `event` to the side output `name`. */
  emitTo(name: string, event: Event): void;
}

/** What a key function returns: text (UTF-8) or bytes. */
export type Key = string | Uint8Array;

/**
 * Where {@link KeyFunction.keysInto} writes keys: one per event, in
 * order, packed as they come.
 */
export class KeyWriter {
  /** Keys written so far. */
  readonly length: number;
  /** The key buffer (replaced when it grows: read it after `reserve`). */
  readonly bytes: Uint8Array;
  /** Append a key of `n` bytes; its offset in {@link bytes}, where the caller writes it. */
  reserve(n: number): number;
  /** Append a key: text (UTF-8) or bytes. */
  push(key: Key): void;
}

/** Computes the key a keyed pipeline partitions events by. */
export interface KeyFunction {
  /** The key of `event`. */
  key(event: Event): Key;
  /**
   * Optional fast form of {@link key} for hot paths: write the key of
   * every event of `events`, in order, to `out` (with the raw accessors,
   * no object per event). The SDK calls it instead of `key` when present.
   */
  keysInto?(events: EventList, out: KeyWriter): void;
}

/** Processes the events of one key with that key's state and timers. */
export interface ProcessFunction {
  /** Handle `events` (oldest first) of `key`; state handles are scoped to `key`. */
  process(key: Uint8Array, events: EventList, ctx: Context): void;
  /** A timer registered for `key` has fired (optional). */
  onTimer?(key: Uint8Array, timer: FiredTimer, ctx: Context): void;
}

/**
 * A window aggregate: the host assigns events to windows and keeps one
 * accumulator per (key, window), stored with `accumulatorCodec` (JSON by
 * default).
 */
export interface AggregateFunction<Acc> {
  /** A new window's accumulator (default: 0). */
  createAccumulator(): Acc;
  /** `accumulator` with `event` folded in. */
  add(accumulator: Acc, event: Event): Acc;
  /** Two accumulators combined (when session windows merge). */
  merge(a: Acc, b: Acc): Acc;
  /** The outputs of `key`'s finished `window` (again on a late update). */
  result(key: Uint8Array, window: Window, accumulator: Acc): Event | Event[] | undefined;
  /** How accumulators are stored (default: {@link Codec.json}). */
  accumulatorCodec?: StateCodec<Acc>;
}

/** A stateless map, filter or flat-map, chained before the next stage. */
export interface TransformFunction {
  /** Emit the outputs for `event` (none, one or several). */
  transform(event: Event, out: Emitter): void;
}

/** An error reported to the host for a whole call (`function-error`). */
export class FunctionError extends Error {
  constructor(message: string);
}

/** The roles (`key`, `process`, `aggregate`, `transform`) an object implements, from its methods. */
export function rolesOf(fn: object): Array<'key' | 'process' | 'aggregate' | 'transform'>;
