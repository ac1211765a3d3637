"""Keyed state: :class:`ValueState`, :class:`MapState`, :class:`ListState`.

Declare handles when the function is created (``self.total =
ValueState("total")``); they open lazily, on first use inside a call, and
always read and write the state of the key being processed. Values are
stored with a codec, compact JSON by default (see :mod:`weir.codec`).
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any, Generic, Iterable, Iterator, List, Optional, Tuple, TypeVar, Union

from . import _host
from .codec import JSON, Codec

T = TypeVar("T")
K = TypeVar("K")
V = TypeVar("V")


class TtlUpdate(IntEnum):
    """Which accesses renew a value's time to live (Flink's ``UpdateType``)."""

    ON_CREATE_AND_WRITE = 0
    """Creating or writing a value renews it; reads do not."""
    ON_READ_AND_WRITE = 1
    """Reads renew it too (such states are not read ahead by the host)."""


class Ttl:
    """A time to live: a value not renewed for ``millis`` ms of processing
    time reads as absent and is purged in the background."""

    __slots__ = ("millis", "update")

    def __init__(self, millis: int, update: TtlUpdate = TtlUpdate.ON_CREATE_AND_WRITE) -> None:
        if millis < 1:
            raise ValueError("a time to live must be at least a millisecond")
        self.millis = int(millis)
        self.update = update

    @classmethod
    def seconds(cls, seconds: float, update: TtlUpdate = TtlUpdate.ON_CREATE_AND_WRITE) -> "Ttl":
        """A time to live of ``seconds``."""
        return cls(int(seconds * 1000), update)

    def __repr__(self) -> str:
        return f"Ttl({self.millis}, {self.update.name})"


class _State:
    """A lazily opened state handle."""

    _kind = ""

    def __init__(self, name: str, *, ttl: Optional[Ttl] = None, codec: Codec[Any] = JSON) -> None:
        if not name or len(name.encode()) > 255:
            raise ValueError(f"invalid state name {name!r}: 1 to 255 bytes")
        self.name = name
        self.ttl = ttl
        self.codec = codec
        self._handle: Any = None
        self._epoch = -1

    def _open(self) -> Any:
        if self._epoch != _host.EPOCH:
            self._handle = getattr(_host.HOST, "open_" + self._kind)(self.name, self.ttl)
            self._epoch = _host.EPOCH
        return self._handle

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


class ValueState(_State, Generic[T]):
    """A single value per key::

        self.total = ValueState[int]("total")       # in __init__
        total = self.total.get(0) + amount          # in process
        self.total.set(total)

    Reads and writes inside ``process`` cost no host call once the host
    reads the state ahead (from the second batch on): they are served from
    and buffered in the batch.
    """

    _kind = "value"

    def __init__(self, name: str, *, ttl: Optional[Ttl] = None, codec: Codec[T] = JSON) -> None:
        """A handle on the value state called ``name`` (opened on first use)."""
        super().__init__(name, ttl=ttl, codec=codec)
        self._gen = -1
        self._slot: Optional[int] = None

    def _cell(self) -> Optional[int]:
        """The current key's read-ahead cell, if the host sent this state."""
        b = _host.B
        if b.prefetched is None or b.current is None:
            return None
        if self._gen != b.generation:
            self._gen = b.generation
            self._slot = b.pindex.get(self.name)
        if self._slot is None:
            return None
        return self._slot * b.keys + b.current

    def get_bytes(self) -> Optional[bytes]:
        """The current key's stored bytes, if set."""
        b = _host.B
        current = b.current
        if b.prefetched is not None and current is not None:
            if self._gen != b.generation:
                self._gen = b.generation
                self._slot = b.pindex.get(self.name)
            slot = self._slot
            if slot is not None:
                cell = slot * b.keys + current
                written = b.latest[cell]
                if written < 0:
                    p = b.prefetched
                    if not p.present[cell]:
                        return None
                    ends = p.ends
                    return p.values[ends[cell - 1] if cell else 0 : ends[cell]]
                if not b.present[written]:
                    return None
                ends = b.ends
                return bytes(b.values[ends[written - 1] if written else 0 : ends[written]])
        _host.selected()
        return self._open().get()

    def get(self, default: Any = None) -> Any:
        """The current key's value, or ``default`` when none is set."""
        # get_bytes() inlined for the read-ahead case: the hot path.
        b = _host.B
        current = b.current
        if b.prefetched is not None and current is not None and self._gen == b.generation:
            slot = self._slot
            if slot is not None:
                cell = slot * b.keys + current
                if b.latest[cell] < 0:
                    p = b.prefetched
                    if not p.present[cell]:
                        return default
                    ends = p.ends
                    return self.codec.decode(p.values[ends[cell - 1] if cell else 0 : ends[cell]])
        raw = self.get_bytes()
        return default if raw is None else self.codec.decode(raw)

    def set(self, value: T) -> None:
        """Replace the current key's value."""
        self._write(self.codec.encode(value))

    def clear(self) -> None:
        """Remove the current key's value."""
        self._write(None)

    def _write(self, raw: Optional[bytes]) -> None:
        b = _host.B
        current = b.current
        if b.prefetched is not None and current is not None:
            if self._gen != b.generation:
                self._gen = b.generation
                self._slot = b.pindex.get(self.name)
            slot = self._slot
            if slot is not None:
                cell = slot * b.keys + current
                b.latest[cell] = len(b.cells)
                b.cells.append((slot, current))
                if raw is None:
                    b.present.append(False)
                else:
                    b.values += raw
                    b.present.append(True)
                b.ends.append(len(b.values))
                return
        _host.selected()
        if raw is None:
            self._open().clear()
        else:
            self._open().set(raw)


class MapState(_State, Generic[K, V]):
    """A map of user keys to values per key. User keys are stored with
    ``key_codec`` (JSON by default) and listed in the byte order of their
    stored form."""

    _kind = "map"

    def __init__(
        self,
        name: str,
        *,
        ttl: Optional[Ttl] = None,
        codec: Codec[V] = JSON,
        key_codec: Codec[K] = JSON,
    ) -> None:
        """A handle on the map state called ``name`` (opened on first use)."""
        super().__init__(name, ttl=ttl, codec=codec)
        self.key_codec = key_codec

    def _h(self) -> Any:
        _host.selected()
        return self._open()

    def get(self, key: K, default: Any = None) -> Any:
        """The value under ``key``, or ``default``."""
        raw = self._h().get(self.key_codec.encode(key))
        return default if raw is None else self.codec.decode(raw)

    def put(self, key: K, value: V) -> None:
        """Store ``value`` under ``key``."""
        self._h().put(self.key_codec.encode(key), self.codec.encode(value))

    def remove(self, key: K) -> None:
        """Remove ``key`` and its value."""
        self._h().remove(self.key_codec.encode(key))

    def contains(self, key: K) -> bool:
        """Whether ``key`` has a value."""
        return bool(self._h().contains(self.key_codec.encode(key)))

    __contains__ = contains

    def entries(self, start_after: Optional[K] = None, page: int = 1024) -> Iterator[Tuple[K, V]]:
        """Every (key, value) after ``start_after``, in stored-key order,
        fetched ``page`` entries per host call."""
        after = None if start_after is None else self.key_codec.encode(start_after)
        while True:
            chunk = self._h().entries(after, page)
            for k, v in chunk:
                yield self.key_codec.decode(k), self.codec.decode(v)
            if len(chunk) < page:
                return
            after = chunk[-1][0]

    def keys(self) -> Iterator[K]:
        """Every key, in stored-key order."""
        return (k for k, _ in self.entries())

    def values(self) -> Iterator[V]:
        """Every value, in stored-key order."""
        return (v for _, v in self.entries())

    def is_empty(self) -> bool:
        """Whether the map has no entries."""
        return bool(self._h().is_empty())

    def clear(self) -> None:
        """Remove every entry."""
        self._h().clear()


class ListState(_State, Generic[T]):
    """An append-mostly list of values per key."""

    _kind = "list"

    def __init__(self, name: str, *, ttl: Optional[Ttl] = None, codec: Codec[T] = JSON) -> None:
        """A handle on the list state called ``name`` (opened on first use)."""
        super().__init__(name, ttl=ttl, codec=codec)

    def _h(self) -> Any:
        _host.selected()
        return self._open()

    def add(self, value: T) -> None:
        """Append ``value``."""
        self._h().add(self.codec.encode(value))

    def add_all(self, values: Iterable[T]) -> None:
        """Append ``values`` in order (one host call)."""
        self._h().add_all([self.codec.encode(v) for v in values])

    def get(self) -> List[T]:
        """Every value, oldest first."""
        return [self.codec.decode(v) for v in self._h().get()]

    def __iter__(self) -> Iterator[T]:
        return iter(self.get())

    def update(self, values: Iterable[T]) -> None:
        """Replace the whole list."""
        self._h().update([self.codec.encode(v) for v in values])

    def clear(self) -> None:
        """Remove every value."""
        self._h().clear()


StateHandle = Union[ValueState[Any], MapState[Any, Any], ListState[Any]]
