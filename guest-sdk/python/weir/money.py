"""Exact money amounts: integer cents parsed from decimal text, never
through floating point, so sums do not drift (as the Rust SDK's ``Cents``)."""

from __future__ import annotations

from decimal import Decimal
from typing import Union

from .errors import WeirError

_I64_MIN = -(2**63)
_I64_MAX = 2**63 - 1


class Cents:
    """An amount of money in integer cents (a signed 64-bit range).

    >>> str(Cents.parse("0.10") + Cents.parse("0.20"))
    '0.30'
    """

    __slots__ = ("cents",)

    cents: int

    def __init__(self, cents: int = 0) -> None:
        if not _I64_MIN <= cents <= _I64_MAX:
            raise WeirError("amount overflows")
        self.cents = cents

    @classmethod
    def parse(cls, text: Union[str, bytes, int, Decimal]) -> "Cents":
        """Parse a decimal amount such as ``20``, ``7.5`` or ``-12.25`` (at
        most two decimals). Surrounding quotes are ignored, so the raw text
        of a JSON number or string both work; an ``int`` or a ``Decimal``
        (``json.loads(..., parse_float=Decimal)``) is taken as its text.
        Floats are refused: they are not exact."""
        if isinstance(text, bool) or isinstance(text, float):
            raise WeirError(f"amount {text!r} is not a decimal with at most two decimals")
        if isinstance(text, bytes):
            text = text.decode("utf-8", "replace")
        elif not isinstance(text, str):
            text = str(text)
        text = text.strip().strip('"')
        negative = text.startswith("-")
        digits = text[1:] if negative else text
        whole, _, fraction = digits.partition(".")
        if (
            not whole
            or len(fraction) > 2
            or not (whole + fraction).isascii()
            or not (whole + fraction).isdigit()
        ):
            raise WeirError(f"amount {text!r} is not a decimal with at most two decimals")
        cents = int(whole) * 100 + int((fraction + "00")[:2])
        if cents > _I64_MAX:
            raise WeirError(f"amount {text!r} is not a decimal with at most two decimals")
        return cls(-cents if negative else cents)

    def __add__(self, other: "Cents") -> "Cents":
        """The sum; raises :class:`WeirError` beyond the 64-bit range."""
        if not isinstance(other, Cents):
            return NotImplemented
        return Cents(self.cents + other.cents)

    def __sub__(self, other: "Cents") -> "Cents":
        """The difference; raises :class:`WeirError` beyond the 64-bit range."""
        if not isinstance(other, Cents):
            return NotImplemented
        return Cents(self.cents - other.cents)

    def __neg__(self) -> "Cents":
        return Cents(-self.cents)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Cents) and other.cents == self.cents

    def __lt__(self, other: "Cents") -> bool:
        return self.cents < other.cents

    def __le__(self, other: "Cents") -> bool:
        return self.cents <= other.cents

    def __hash__(self) -> int:
        return hash(self.cents)

    def __int__(self) -> int:
        return self.cents

    def __str__(self) -> str:
        """Two decimals, e.g. ``50.00`` or ``-0.05``: also valid JSON number text."""
        sign = "-" if self.cents < 0 else ""
        whole, fraction = divmod(abs(self.cents), 100)
        return f"{sign}{whole}.{fraction:02d}"

    def __repr__(self) -> str:
        return f"Cents({self.cents})"
