// Types of @weir/sdk/testing.

import { Event, StateCodec, Window, TimeDomain } from './index.js';

export { Event };

/** A timer not fired yet. */
export interface PendingTimer {
  domain: TimeDomain;
  timestamp: number;
  key: Uint8Array;
}

/**
 * Runs a function natively against an in-memory host (state, timers,
 * clocks, outputs), with the same SDK code that runs in the component.
 *
 * ```ts
 * const harness = new Harness(Revenue);
 * const out = harness.process('2', [new Event('{"order_id":1,"customer_id":2,"amount":1.50}', 0)]);
 * ```
 */
export class Harness<F extends object> {
  /** @param fn the function's class (constructed with no arguments) or an instance */
  constructor(fn: (new () => F) | F);
  /** The function instance. */
  readonly function: F;
  /** The key of `event`. */
  key(event: Event): Uint8Array;
  /** The key of `event` as UTF-8 text. */
  keyText(event: Event): string;
  /** Process `events` of `key` as one batch; the outputs. */
  process(key: string | Uint8Array, events: Event[]): Event[];
  /** Set the watermark without firing timers. */
  setWatermark(ms: number): void;
  /** Set processing time without firing timers. */
  setProcessingTime(ms: number): void;
  /** Move the watermark and fire due event-time timers; their outputs. */
  advanceWatermark(ms: number): Event[];
  /** Move processing time and fire due processing-time timers; their outputs. */
  advanceProcessingTime(ms: number): Event[];
  /** Timers not fired yet, in timestamp order. */
  pendingTimers(): PendingTimer[];
  /** Value state `name` of `key`, decoded with `codec` (JSON by default). */
  value<T = any>(key: string | Uint8Array, name: string, codec?: StateCodec<T>): T | undefined;
  /** Take the events sent to side output `name`. */
  takeSideOutput(name: string): Event[];
  /** Log lines so far: `[level, message]`. */
  readonly logs: Array<[string, string]>;
  /** Host calls made so far, by name (to check batching). */
  readonly hostCalls: Record<string, number>;
  /** Fold `events` into a new accumulator for `key`'s `window`; the window's outputs. */
  aggregate(key: string | Uint8Array, window: Window, events: Event[]): Event[];
  /** The accumulator after folding `events` into `accumulator` (a new one when omitted). */
  accumulate<Acc = any>(events: Event[], accumulator?: Acc): Acc;
  /** Run `transform` over `events`; the outputs. */
  transform(events: Event[]): Event[];
}
