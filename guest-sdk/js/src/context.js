// What a function may ask of the host while it runs.

import { host, selected } from './scope.js';
import { EventPacker, Event, bytes } from './event.js';

/** Log levels, as the WIT's `log-level`. */
export const LogLevel = Object.freeze({ trace: 'trace', debug: 'debug', info: 'info', warn: 'warn', error: 'error' });

/** Which clock a timer follows, as the WIT's `time-domain`. */
export const TimeDomain = Object.freeze({ eventTime: 'event-time', processingTime: 'processing-time' });

/**
 * Outputs, timers, clocks and logging for one call. Outputs are packed as
 * they come and handed to the host with one `emit-batch` at the end of
 * the call.
 */
export class Context {
  constructor() {
    this.out = new EventPacker(1024);
  }

  /**
   * Emit an output: an `Event` (its timestamp unless `timestamp` is
   * given), or a value (bytes or a string) at `timestamp`.
   */
  emit(value, timestamp = undefined) {
    if (value instanceof Event) {
      if (timestamp !== undefined) value = new Event(value.value, timestamp, value);
      this.out.pushEvent(value);
    } else {
      if (timestamp === undefined) throw new Error('emit(value, timestamp): a timestamp is needed for a bare value');
      this.out.push(value, timestamp);
    }
  }

  /**
   * Reserve an output of `length` bytes at `timestamp` and return its
   * offset in `outputView`, where the caller writes it (for hot paths:
   * no allocation per output). Valid until the next emit.
   */
  reserve(length, timestamp) {
    return this.out.reserve(length, timestamp);
  }

  /**
   * Reserve an output of `length` bytes at the timestamp of event `i` of
   * `events` (copied without converting it); its offset in `outputView`.
   */
  reserveAt(length, events, i) {
    return this.out.reserveAt(length, events.packed, events.from + i);
  }

  /** A DataView over the output buffer (see `reserve`). */
  get outputView() {
    return this.out.view;
  }

  /** The output buffer as bytes (see `reserve`). */
  get outputBytes() {
    return this.out.buf;
  }

  /** Send `event` to the side output called `name` (declared in the spec). */
  emitTo(name, event, timestamp = undefined) {
    const e = event instanceof Event ? event : new Event(bytes(event), timestamp ?? 0);
    host.emitTo(name, e);
  }

  /** The event-time watermark (ms); before the first one, the smallest s64. */
  get watermark() {
    return host.currentWatermark();
  }

  /** The host's processing time (ms), fixed for the call. */
  get processingTime() {
    return host.processingTime();
  }

  /** Ask for `onTimer` for the current key once the watermark reaches `timestamp`. */
  registerEventTimeTimer(timestamp) {
    selected();
    host.registerTimer(TimeDomain.eventTime, timestamp);
  }

  /** Ask for `onTimer` for the current key once processing time reaches `timestamp`. */
  registerProcessingTimeTimer(timestamp) {
    selected();
    host.registerTimer(TimeDomain.processingTime, timestamp);
  }

  /** Cancel the current key's event-time timer at `timestamp`. */
  deleteEventTimeTimer(timestamp) {
    selected();
    host.deleteTimer(TimeDomain.eventTime, timestamp);
  }

  /** Cancel the current key's processing-time timer at `timestamp`. */
  deleteProcessingTimeTimer(timestamp) {
    selected();
    host.deleteTimer(TimeDomain.processingTime, timestamp);
  }

  /** Write a line to the host's log (level: 'trace' … 'error'). */
  log(level, message) {
    host.log(level, String(message));
  }

  /** Send the buffered outputs (one host call). Internal. */
  flush() {
    if (this.out.length > 0) host.emitBatch(this.out.finish());
  }

  /** Forget buffered outputs (after a failed call). Internal. */
  reset() {
    if (this.out.length > 0) this.out.finish();
  }
}
