"""How state values and accumulators are stored: JSON by default.

The default codec is compact UTF-8 JSON (``json.dumps(value,
separators=(",", ":"), ensure_ascii=False)``), the same as the
TypeScript SDK's, so a state written by a Python function is readable by a
JavaScript one and after any restore. ``RAW`` stores ``bytes`` as they are.
Any object with ``encode(value) -> bytes`` and ``decode(bytes) -> value``
can serve as a codec.
"""

from __future__ import annotations

import json
from typing import Any, Protocol, TypeVar

T = TypeVar("T")


class Codec(Protocol[T]):
    """Turns values into bytes for the host and back."""

    def encode(self, value: T) -> bytes:
        """The stored form of ``value``."""
        ...

    def decode(self, data: bytes) -> T:
        """The value stored as ``data``."""
        ...


class JsonCodec:
    """Compact UTF-8 JSON (no spaces): the default codec."""

    def encode(self, value: Any) -> bytes:
        """``value`` as compact JSON."""
        if type(value) is int:  # the common counter: skip the encoder
            return str(value).encode()
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()

    def decode(self, data: bytes) -> Any:
        """The JSON ``data`` parsed."""
        try:  # the common counter: skip the parser
            return int(data)
        except ValueError:
            return json.loads(data)


class RawCodec:
    """Bytes stored as they are."""

    def encode(self, value: bytes) -> bytes:
        """``value`` itself (``bytes``, ``bytearray`` or ``str`` as UTF-8)."""
        return value.encode() if isinstance(value, str) else bytes(value)

    def decode(self, data: bytes) -> bytes:
        """``data`` itself."""
        return bytes(data)


#: The default codec: compact JSON.
JSON = JsonCodec()
#: Raw bytes.
RAW = RawCodec()
