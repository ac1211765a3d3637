"""Cents: the same parsing rules as the Rust SDK's money.rs."""

from decimal import Decimal

import pytest

from weir import Cents, WeirError


def test_parses_amounts_exactly():
    assert Cents.parse("20.00") == Cents(2000)
    assert Cents.parse("7.5") == Cents(750)
    assert Cents.parse('"12"') == Cents(1200)
    assert Cents.parse("-0.05") == Cents(-5)
    assert Cents.parse(Decimal("0.10")) == Cents(10)
    assert Cents.parse(20) == Cents(2000)
    assert str(Cents(-5)) == "-0.05"
    assert str(Cents(5000)) == "50.00"
    assert str(Cents.parse("0.10") + Cents.parse("0.20")) == "0.30"


@pytest.mark.parametrize("bad", ["1.234", "abc", "", "1e3", "--1", ".", "99999999999999999999", "١٢", 1.5])
def test_rejects_what_rust_rejects(bad):
    with pytest.raises(WeirError):
        Cents.parse(bad)


def test_overflow_is_an_error():
    with pytest.raises(WeirError):
        Cents(2**63 - 1) + Cents(1)
