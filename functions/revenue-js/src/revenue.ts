/**
 * Per-customer running revenue (in TypeScript; Weir's example functions
 * have the same in Rust and Python, with byte-identical output).
 *
 * Input: JSON orders `{"order_id", "customer_id", "amount", "event_time"}`.
 * Key: the customer id. State: the customer's total in integer cents.
 * Output: one record per order with the customer's new total:
 * `{"order_id":114,"customer_id":1,"amount":30.00,"total":50.00}`.
 *
 * Amounts are exact ({@link Cents}), never floating point.
 */
import { Cents, Context, Event, EventList, KeyFunction, ProcessFunction, ValueState } from '@weir/sdk';

/** One order as read from the source. */
interface Order {
  order_id: number;
  customer_id: number;
  amount: number | string;
}

/** The order in `event`; an error when a field is missing. */
function order(event: Event): Order {
  const o = event.json<Order>();
  if (o === null || typeof o !== 'object' || o.order_id === undefined || o.customer_id === undefined || o.amount === undefined) {
    throw new Error(`not an order: ${event.text()}`);
  }
  return o;
}

/** The function: keyed by customer, keeping each customer's total. */
export default class Revenue implements KeyFunction, ProcessFunction {
  /** The customer's total in cents. */
  total = new ValueState<number>('total');

  key(event: Event): string {
    return String(order(event).customer_id);
  }

  process(_key: Uint8Array, events: EventList, ctx: Context): void {
    let total = new Cents(this.total.get() ?? 0);
    for (const event of events) {
      const o = order(event);
      const amount = Cents.from(o.amount);
      total = total.add(amount);
      ctx.emit(Event.fromJson({ order_id: o.order_id, customer_id: o.customer_id, amount, total }, event.timestamp));
    }
    this.total.set(total.toNumber());
  }
}
