"""The running-sum workload of ``weir bench`` in Python: the twin of the
process part of functions/bench-sum (and its window aggregate).

Input: binary orders of 24 bytes, ``order_id``, ``customer_id`` (u64) and
``amount_cents`` (i64), little-endian (the generator's ``encoding:
binary``). Key: the customer id's 8 bytes. Process: each customer's
running total in cents, one 16-byte ``(customer, total)`` output per order.
Aggregate: the total per customer per window, ``(customer, total)`` at the
window's end.

Made for speed: it never makes an :class:`Event`; it reads a key's orders
straight from the batch buffer with :func:`struct.iter_unpack` and packs
all outputs of a key with one :meth:`Context.emit_fixed`.
"""

from struct import Struct

from weir import AggregateFunction, Context, Event, Events, KeyFunction, ProcessFunction, ValueState, WeirError, Window, function

ORDER = Struct("<QQq")
PAIR = Struct("<8sq")
ORDER_BYTES = ORDER.size


def _orders(events: Events) -> bytes:
    """The events' bytes, checked to be whole orders (they are back to back)."""
    start, end = events.span()
    if end - start != ORDER_BYTES * len(events):
        raise WeirError(f"expected binary orders of {ORDER_BYTES} bytes")
    return events.buffer[start:end]


@function
class BenchSum(KeyFunction, ProcessFunction, AggregateFunction[int]):
    """Running and windowed sums of order amounts per customer."""

    def __init__(self) -> None:
        self.total = ValueState[int]("total")

    def key(self, event: Event) -> bytes:
        if len(event.value) != ORDER_BYTES:
            raise WeirError(f"expected a binary order of {ORDER_BYTES} bytes")
        return event.value[8:16]

    def keys(self, events: Events) -> list:
        buffer = events.buffer
        _orders(events)
        return [buffer[s + 8 : s + 16] for s in events.starts()]

    def process(self, key: bytes, events: Events, ctx: Context) -> None:
        total = self.total.get(0)
        out = bytearray()
        pack = PAIR.pack
        for _, _, amount in ORDER.iter_unpack(_orders(events)):
            total += amount
            out += pack(key, total)
        if not -(2**63) <= total < 2**63:
            raise WeirError("total overflows")
        ctx.emit_fixed(out, PAIR.size, events.timestamps())
        self.total.set(total)

    def create_accumulator(self) -> int:
        return 0

    def add(self, total: int, event: Event) -> int:
        return total + ORDER.unpack(event.value)[2]

    def add_all(self, total: int, events: Events) -> int:
        return total + sum(amount for _, _, amount in ORDER.iter_unpack(_orders(events)))

    def merge(self, a: int, b: int) -> int:
        return a + b

    def result(self, key: bytes, window: Window, total: int) -> Event:
        return Event(PAIR.pack(key, total), window.end - 1)
