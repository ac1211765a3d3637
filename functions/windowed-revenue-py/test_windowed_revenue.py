"""Native tests of windowed_revenue.py (run with pytest)."""

from weir import Event, Window
from weir.testing import Harness
from windowed_revenue import WindowedRevenue


def order(amount: str) -> Event:
    return Event(f'{{"customer_id":2,"amount":{amount}}}', 0)


def test_sums_a_window_exactly():
    h = Harness(WindowedRevenue)
    out = h.aggregate(b"2", Window(0, 60_000), [order("0.10"), order("0.20")])
    assert out[0].value == b'{"customer_id":2,"window_start":0,"window_end":60000,"revenue":0.30}'
    assert out[0].timestamp == 59_999
    assert h.function.merge(150, 250) == 400


def test_keys_by_customer():
    assert Harness(WindowedRevenue).key(order("1")) == b"2"
