"""Native tests of bench_sum.py (run with pytest)."""

import struct

import pytest

from bench_sum import BenchSum
from weir import Event, FunctionError, Window
from weir.testing import Harness


def order(order_id: int, customer: int, cents: int) -> Event:
    return Event(struct.pack("<QQq", order_id, customer, cents), order_id)


def pair(customer: int, total: int) -> bytes:
    return struct.pack("<Qq", customer, total)


def test_keys_are_the_customer_ids_bytes():
    h = Harness(BenchSum)
    assert h.keys([order(1, 7, 5), order(2, 9, 5)]) == [pair(7, 0)[:8], pair(9, 0)[:8]]
    with pytest.raises(FunctionError):
        h.keys([Event(b"short")])


def test_running_and_windowed_totals():
    h = Harness(BenchSum)
    key = (7).to_bytes(8, "little")
    out = h.process(key, [order(1, 7, 250), order(2, 7, 100)])
    assert [e.value for e in out] == [pair(7, 250), pair(7, 350)]
    assert [e.timestamp for e in out] == [1, 2]
    out = h.process_batch([(key, [order(3, 7, -50)]), ((8).to_bytes(8, "little"), [order(4, 8, 1)])])
    assert [e.value for e in out] == [pair(7, 300), pair(8, 1)]
    assert h.value(key, "total") == 300
    out = h.aggregate(key, Window(0, 60_000), [order(1, 7, 5), order(2, 7, 6)])
    assert out[0].value == pair(7, 11) and out[0].timestamp == 59_999


def test_pairs_are_summed_per_region():
    h = Harness(BenchSum)
    first, second = Event(pair(70, 250), 1), Event(pair(134, 100), 2)
    region = (70 % 64).to_bytes(8, "little")
    assert h.keys([first, second, order(3, 1, 5)]) == [region, region, (1).to_bytes(8, "little")]
    out = h.process(region, [first, second])
    assert [e.value for e in out] == [pair(6, 250), pair(6, 350)]
    with pytest.raises(FunctionError, match="not 5 bytes"):
        h.key(Event(b"12345"))
