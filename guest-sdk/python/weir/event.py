"""Events, windows, timers and the lazy view over a packed batch."""

from __future__ import annotations

import json
from enum import IntEnum
from typing import Any, Iterator, List, Optional, Sequence, Tuple, Union, overload

_EMPTY: Tuple[Tuple[str, bytes], ...] = ()


class TimeDomain(IntEnum):
    """Which clock a timer follows (the WIT's ``time-domain``)."""

    EVENT_TIME = 0
    """Fires when the watermark reaches the timer."""
    PROCESSING_TIME = 1
    """Fires when the host's clock reaches the timer."""


class LogLevel(IntEnum):
    """Severity of a :meth:`Context.log` line."""

    TRACE = 0
    DEBUG = 1
    INFO = 2
    WARN = 3
    ERROR = 4


class Window:
    """A half-open event-time interval ``[start, end)`` in milliseconds."""

    __slots__ = ("start", "end")

    def __init__(self, start: int, end: int) -> None:
        self.start = start
        self.end = end

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Window) and (other.start, other.end) == (self.start, self.end)

    def __hash__(self) -> int:
        return hash((self.start, self.end))

    def __repr__(self) -> str:
        return f"Window(start={self.start}, end={self.end})"


class FiredTimer:
    """A timer that has fired: the time it was registered for and its clock."""

    __slots__ = ("timestamp", "domain")

    def __init__(self, timestamp: int, domain: TimeDomain) -> None:
        self.timestamp = timestamp
        self.domain = domain

    def __repr__(self) -> str:
        return f"FiredTimer({self.timestamp}, {self.domain.name})"


class Event:
    """One record: a payload (``value``), an event time in ms since the
    epoch (``timestamp``), the source's key if it had one (``key``) and
    named byte-string ``headers``."""

    __slots__ = ("value", "timestamp", "key", "headers")

    value: bytes
    timestamp: int
    key: Optional[bytes]
    headers: Sequence[Tuple[str, bytes]]

    def __init__(
        self,
        value: Union[bytes, bytearray, str],
        timestamp: int = 0,
        key: Optional[bytes] = None,
        headers: Sequence[Tuple[str, bytes]] = _EMPTY,
    ) -> None:
        self.value = value.encode() if isinstance(value, str) else bytes(value)
        self.timestamp = timestamp
        self.key = key
        self.headers = headers

    @classmethod
    def from_json(cls, obj: Any, timestamp: int = 0) -> "Event":
        """An event whose value is ``obj`` as compact JSON (no spaces)."""
        return cls(json.dumps(obj, separators=(",", ":")).encode(), timestamp)

    def json(self, **kwargs: Any) -> Any:
        """The value parsed as JSON (``kwargs`` go to :func:`json.loads`,
        e.g. ``parse_float=decimal.Decimal`` to keep amounts exact)."""
        return json.loads(self.value, **kwargs)

    def text(self) -> str:
        """The value as UTF-8 text."""
        return self.value.decode()

    def header(self, name: str) -> Optional[bytes]:
        """The first header called ``name``, if any."""
        for n, v in self.headers:
            if n == name:
                return v
        return None

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Event)
            and other.value == self.value
            and other.timestamp == self.timestamp
            and other.key == self.key
            and list(other.headers) == list(self.headers)
        )

    def __repr__(self) -> str:
        extra = f", key={self.key!r}" if self.key is not None else ""
        extra += f", headers={list(self.headers)!r}" if self.headers else ""
        return f"Event({self.value!r}, {self.timestamp}{extra})"


class _Packed:
    """One packed event batch, with its per-event keys and headers indexed
    only when the batch has any."""

    __slots__ = ("values", "ends", "timestamps", "keys", "headers")

    def __init__(self, batch: Any) -> None:
        self.values: bytes = batch.values
        self.ends: List[int] = batch.value_ends
        self.timestamps: List[int] = batch.timestamps
        self.keys: Optional[dict] = None
        self.headers: Optional[dict] = None
        if batch.keyed:
            keys, kends, start = batch.keys, batch.key_ends, 0
            self.keys = {}
            for index, end in zip(batch.keyed, kends):
                self.keys[index] = keys[start:end]
                start = end
        if batch.headers:
            self.headers = {}
            for index, name, value in batch.headers:
                self.headers.setdefault(index, []).append((name, value))

    def event(self, i: int) -> Event:
        ends = self.ends
        e = Event.__new__(Event)
        e.value = self.values[ends[i - 1] if i else 0 : ends[i]]
        e.timestamp = self.timestamps[i]
        e.key = self.keys.get(i) if self.keys is not None else None
        e.headers = self.headers.get(i, _EMPTY) if self.headers is not None else _EMPTY
        return e


class Events(Sequence[Event]):
    """The events of one call (one key's, one window's), oldest first.

    A lazy view over the batch the host sent: an :class:`Event` is made
    only when you index or iterate. For hot loops, :meth:`values`,
    :meth:`timestamps` and :attr:`buffer` with :meth:`starts` reach the
    packed bytes without making events (e.g. ``struct.unpack_from(fmt,
    events.buffer, start)``)."""

    __slots__ = ("_batch", "_start", "_stop")

    def __init__(self, batch: _Packed, start: int, stop: int) -> None:
        self._batch = batch
        self._start = start
        self._stop = stop

    @classmethod
    def of(cls, events: Sequence[Event]) -> "Events":
        """A view over ``events`` (as the test harness passes them)."""
        return cls(_Packed(pack_events(events)), 0, len(events))

    def __len__(self) -> int:
        return self._stop - self._start

    @overload
    def __getitem__(self, i: int) -> Event: ...
    @overload
    def __getitem__(self, i: slice) -> List[Event]: ...
    def __getitem__(self, i: Union[int, slice]) -> Union[Event, List[Event]]:
        if isinstance(i, slice):
            return [self._batch.event(self._start + j) for j in range(*i.indices(len(self)))]
        n = len(self)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("event index out of range")
        return self._batch.event(self._start + i)

    def __iter__(self) -> Iterator[Event]:
        event = self._batch.event
        for i in range(self._start, self._stop):
            yield event(i)

    def values(self) -> Iterator[bytes]:
        """Each event's value, without making events."""
        b, start, stop = self._batch, self._start, self._stop
        values, ends = b.values, b.ends
        begin = ends[start - 1] if start else 0
        for end in ends[start:stop]:
            yield values[begin:end]
            begin = end

    def timestamps(self) -> List[int]:
        """Each event's timestamp."""
        return self._batch.timestamps[self._start : self._stop]

    @property
    def buffer(self) -> bytes:
        """The whole batch's values back to back (index it with :meth:`starts`)."""
        return self._batch.values

    def starts(self) -> List[int]:
        """Where each event's value starts in :attr:`buffer`."""
        ends, start, stop = self._batch.ends, self._start, self._stop
        if start:
            return ends[start - 1 : stop - 1]
        return [0] + ends[: stop - 1] if stop else []

    def span(self) -> Tuple[int, int]:
        """Where these events' values start and end in :attr:`buffer`: they
        are back to back, so ``buffer[start:end]`` is all of them."""
        ends, start, stop = self._batch.ends, self._start, self._stop
        first = ends[start - 1] if start else 0
        return first, (ends[stop - 1] if stop > start else first)

    def ends(self) -> List[int]:
        """Where each event's value ends in :attr:`buffer`."""
        return self._batch.ends[self._start : self._stop]

    def __repr__(self) -> str:
        return f"Events({list(self)!r})"


def pack_events(events: Sequence[Event]) -> Any:
    """Pack ``events`` into an ``event-batch``-shaped object."""
    from ._types import EventBatch

    values, ends, stamps = bytearray(), [], []
    keyed, keys, key_ends, headers = [], bytearray(), [], []
    for i, e in enumerate(events):
        values += e.value
        ends.append(len(values))
        stamps.append(e.timestamp)
        if e.key is not None:
            keyed.append(i)
            keys += e.key
            key_ends.append(len(keys))
        for name, value in e.headers:
            headers.append((i, name, bytes(value)))
    return EventBatch(bytes(values), ends, stamps, keyed, bytes(keys), key_ends, headers)
