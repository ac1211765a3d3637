"""Revenue per customer per window: the Python twin of
functions/windowed-revenue — Flink SQL's ``TUMBLE(TABLE orders,
DESCRIPTOR(event_time), INTERVAL '1' MINUTE) … GROUP BY window_start,
window_end, customer_id`` as a Wasm aggregate.

The host assigns each order to windows (as the pipeline spec says) and
keeps one accumulator per (customer, window): the total in cents. When the
watermark passes a window's end the function turns it into
``{"customer_id":1,"window_start":1768471200000,"window_end":1768471260000,"revenue":20.00}``.
"""

import json

from weir import AggregateFunction, Cents, Event, KeyFunction, Window, function

# Orders with their amounts kept as decimal text (made exact cents below).
ORDERS = json.JSONDecoder(parse_float=str)


@function
class WindowedRevenue(KeyFunction, AggregateFunction[int]):
    """Keyed by customer, summing cents per window."""

    def key(self, event: Event) -> str:
        return str(json.loads(event.value)["customer_id"])

    def create_accumulator(self) -> int:
        return 0

    def add(self, total: int, event: Event) -> int:
        order = ORDERS.decode(event.value.decode())
        return (Cents(total) + Cents.parse(order["amount"])).cents

    def merge(self, a: int, b: int) -> int:
        return (Cents(a) + Cents(b)).cents

    def result(self, key: bytes, window: Window, total: int) -> Event:
        return Event(
            f'{{"customer_id":{int(key)},"window_start":{window.start},'
            f'"window_end":{window.end},"revenue":{Cents(total)}}}',
            window.end - 1,
        )
