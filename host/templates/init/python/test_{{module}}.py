"""Native tests of {{module}}.py (run with pytest)."""

import pytest

from {{module}} import Revenue
from weir import Event, FunctionError
from weir.testing import Harness


def order(order_id: int, customer: int, amount: str) -> Event:
    return Event(
        f'{{"order_id":{order_id},"customer_id":{customer},"amount":{amount},'
        f'"event_time":"2026-01-15T10:00:05Z"}}',
        0,
    )


def test_keys_by_customer():
    h = Harness(Revenue)
    assert h.key(order(110, 1, "20.00")) == b"1"
    with pytest.raises(FunctionError):
        h.key(Event(b"{}"))


def test_keeps_a_running_total_per_customer():
    h = Harness(Revenue)
    out = h.process(b"2", [order(111, 2, "15.50"), order(113, 2, "12.50")])
    assert [e.json()["total"] for e in out] == [15.5, 28.0]
    h.process(b"1", [order(110, 1, "20.00")])
    h.process(b"2", [order(151, 2, "20.00")])
    assert h.value(b"2", "total") == 4800
    assert h.value(b"1", "total") == 2000


def test_outputs_two_decimals():
    h = Harness(Revenue)
    out = h.process(b"3", [order(112, 3, "7.25"), order(150, 3, "9.75")])
    assert out[1].value == b'{"order_id":150,"customer_id":3,"amount":9.75,"total":17.00}'


def test_several_keys_in_one_batch():
    h = Harness(Revenue)
    h.process(b"1", [order(1, 1, "1.00")])  # opens the state: read ahead from now on
    out = h.process_batch([(b"1", [order(2, 1, "2.00")]), (b"2", [order(3, 2, "3")])])
    assert [e.json(parse_float=str)["total"] for e in out] == ["3.00", "3.00"]
    assert h.value(b"1", "total") == 300 and h.value(b"2", "total") == 300


def test_a_bad_amount_fails_the_call():
    h = Harness(Revenue)
    with pytest.raises(FunctionError, match="1.234"):
        h.process(b"1", [order(1, 1, "1.234")])
