"""Per-customer running revenue (in Python; Weir's example functions have the
same in Rust and TypeScript, with byte-identical output).

Input: JSON orders ``{"order_id", "customer_id", "amount", "event_time"}``.
Key: the customer id. State: the customer's total in integer cents.
Output: one record per order with the customer's new total:
``{"order_id":114,"customer_id":1,"amount":30.00,"total":50.00}``.

Amounts are parsed from their decimal text into cents (:class:`Cents`),
never through floating point, so totals do not drift.
"""

import json

from weir import Cents, Context, Event, Events, KeyFunction, ProcessFunction, ValueState, function


# Orders with their amounts kept as decimal text (made exact cents below).
ORDERS = json.JSONDecoder(parse_float=str)


@function
class Revenue(KeyFunction, ProcessFunction):
    """Keyed by customer, keeping each customer's total in cents."""

    def __init__(self) -> None:
        self.total = ValueState[int]("total")

    def key(self, event: Event) -> str:
        return str(json.loads(event.value)["customer_id"])

    def process(self, key: bytes, events: Events, ctx: Context) -> None:
        total = Cents(self.total.get(0))
        for event in events:
            order = ORDERS.decode(event.value.decode())
            amount = Cents.parse(order["amount"])
            total += amount
            ctx.emit(
                f'{{"order_id":{order["order_id"]},"customer_id":{order["customer_id"]},'
                f'"amount":{amount},"total":{total}}}',
                event.timestamp,
            )
        self.total.set(total.cents)
