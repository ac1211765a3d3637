"""The running-sum workload of ``weir bench`` in Python: the twin of
functions/bench-sum (process and window aggregate).

Input: binary orders of 24 bytes, ``order_id``, ``customer_id`` (u64) and
``amount_cents`` (i64), little-endian (the generator's ``encoding:
binary``). Key: the customer id's 8 bytes. Process: each customer's
running total in cents, one 16-byte ``(customer, total)`` output per order.
Aggregate: the total per customer per window, ``(customer, total)`` at the
window's end.

It also takes its own outputs, for the second stage of the ``two-stage``
workload: a 16-byte ``(customer, total)`` pair is keyed by its region,
``customer % 64`` (8 bytes), with the total as its amount. Inputs are told
apart by their length (24 or 16).

Made for speed: when a batch holds only orders (the common case) it never
makes an :class:`Event`; it reads a key's orders straight from the batch
buffer with ``iter_unpack`` and packs all outputs of a key with one
:meth:`Context.emit_fixed`.
"""

from operator import sub
from struct import Struct
from typing import List, Tuple

from weir import (
    AggregateFunction,
    Context,
    Event,
    Events,
    KeyFunction,
    ProcessFunction,
    ValueState,
    WeirError,
    Window,
    function,
)

ORDER = Struct("<QQq")
PAIR = Struct("<Qq")
KEYED_PAIR = Struct("<8sq")
ORDER_BYTES = ORDER.size
PAIR_BYTES = PAIR.size
REGIONS = 64
I64 = 2**63


def decode(value: bytes) -> Tuple[int, int]:
    """The key (as a number) and the amount of one input: ``(customer,
    amount_cents)`` of an order, ``(customer % 64, total)`` of a pair."""
    if len(value) == PAIR_BYTES:
        customer, total = PAIR.unpack(value)
        return customer % REGIONS, total
    if len(value) == ORDER_BYTES:
        _, customer, amount = ORDER.unpack(value)
        return customer, amount
    raise WeirError(f"an order (24 bytes) or a (customer, total) pair (16 bytes), not {len(value)} bytes")


@function
class BenchSum(KeyFunction, ProcessFunction, AggregateFunction[int]):
    """Running and windowed sums (per customer, or per region of pairs)."""

    def __init__(self) -> None:
        self.total = ValueState[int]("total")

    def key(self, event: Event) -> bytes:
        return decode(event.value)[0].to_bytes(8, "little")

    def keys(self, events: Events) -> List[bytes]:
        starts = events.starts()
        if set(map(sub, events.ends(), starts)) == {ORDER_BYTES}:  # all orders (C loops)
            buffer = events.buffer
            return [buffer[s + 8 : s + 16] for s in starts]
        return [self.key(event) for event in events]

    def process(self, key: bytes, events: Events, ctx: Context) -> None:
        total = self.total.get(0)
        start, end = events.span()
        out = bytearray()
        if end - start == ORDER_BYTES * len(events):  # orders (keys() checked each one)
            pack = KEYED_PAIR.pack
            for _, _, amount in ORDER.iter_unpack(events.buffer[start:end]):
                total += amount
                out += pack(key, total)
        else:
            region = int.from_bytes(key, "little")
            for value in events.values():
                total += decode(value)[1]
                out += PAIR.pack(region, total)
        if not -I64 <= total < I64:
            raise WeirError("total overflows")
        ctx.emit_fixed(out, PAIR_BYTES, events.timestamps())
        self.total.set(total)

    def create_accumulator(self) -> int:
        return 0

    def add(self, total: int, event: Event) -> int:
        return total + decode(event.value)[1]

    def add_all(self, total: int, events: Events) -> int:
        start, end = events.span()
        if end - start == ORDER_BYTES * len(events):
            return total + sum(amount for _, _, amount in ORDER.iter_unpack(events.buffer[start:end]))
        return sum((decode(value)[1] for value in events.values()), total)

    def merge(self, a: int, b: int) -> int:
        return a + b

    def result(self, key: bytes, window: Window, total: int) -> Event:
        return Event(key + total.to_bytes(8, "little", signed=True), window.end - 1)
