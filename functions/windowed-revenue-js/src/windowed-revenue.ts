/**
 * Revenue per customer per one-minute tumbling window: the TypeScript twin
 * of functions/windowed-revenue (byte-identical output and late output).
 *
 * Input: JSON orders `{"order_id", "customer_id", "amount", "event_time"}`.
 * Key: the customer id. Accumulator: the window's revenue in integer cents.
 * Output, at the window's last millisecond:
 * `{"customer_id":1,"window_start":…,"window_end":…,"revenue":20.00}`.
 *
 * Build: `node guest-sdk/js/bin/weir-build.mjs functions/windowed-revenue-js -o target/functions/windowed-revenue-js.wasm`
 */
import { AggregateFunction, Cents, Event, KeyFunction, Window, text } from '@weir/sdk';

/** The fields of an order this function reads. */
interface Order {
  customer_id: number;
  amount: number | string;
}

/** The order in `event`; an error when a field is missing. */
function order(event: Event): Order {
  const o = event.json<Order>();
  if (o === null || typeof o !== 'object' || o.customer_id === undefined || o.amount === undefined) {
    throw new Error(`not an order: ${event.text()}`);
  }
  return o;
}

/** The function: keyed by customer, summing each window's amounts. */
export default class WindowedRevenue implements KeyFunction, AggregateFunction<number> {
  key(event: Event): string {
    return String(order(event).customer_id);
  }

  createAccumulator(): number {
    return 0;
  }

  add(total: number, event: Event): number {
    return new Cents(total).add(Cents.from(order(event).amount)).toNumber();
  }

  merge(a: number, b: number): number {
    return new Cents(a).add(new Cents(b)).toNumber();
  }

  result(key: Uint8Array, window: Window, total: number): Event {
    const out = {
      customer_id: Number(text(key)),
      window_start: window.start,
      window_end: window.end,
      revenue: new Cents(total),
    };
    return Event.fromJson(out, window.end - 1);
  }
}
