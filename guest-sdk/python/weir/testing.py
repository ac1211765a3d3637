"""A native test harness: run a function's logic with pytest, against an
in-memory host that scopes state per key like the real one.

The harness packs events into the same batches the host sends and runs
the SDK's real glue over them, value-state read-ahead and batched
write-back included::

    from weir import Event
    from weir.testing import Harness

    def test_running_total():
        h = Harness(Revenue)
        out = h.process(b"2", [Event(b'{"order_id":1,"customer_id":2,"amount":1.50}')])
        assert h.value(b"2", "total") == 150
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple, Type, Union

from . import _host, _types
from ._runtime import Guest
from .codec import JSON, Codec
from .event import Event, LogLevel, TimeDomain, Window, _Packed, pack_events
from .state import Ttl, TtlUpdate

EventLike = Union[Event, bytes, str]


def _event(e: EventLike) -> Event:
    return e if isinstance(e, Event) else Event(e, 0)


def _unpack(batch: Any) -> List[Event]:
    packed = _Packed(batch)
    return [packed.event(i) for i in range(len(batch.value_ends))]


class _Stored:
    __slots__ = ("value", "at")

    def __init__(self, value: Any, at: int) -> None:
        self.value = value
        self.at = at


class MockHost:
    """The in-memory host: state per (name, key), timers, outputs, logs.

    It implements the same host interface as the component's imports
    (``weir._wasm.WasmHost``), so the SDK's glue runs unchanged on it. Tests
    normally use it through :class:`Harness` (``harness.host``)."""

    types = _types

    def __init__(self) -> None:
        self.watermark = -(2**63)
        self.processing_time_ = 0
        self.key: Optional[bytes] = None
        self.ttls: Dict[str, Optional[Ttl]] = {}
        self.opened_values: Dict[str, Optional[Ttl]] = {}
        self.values: Dict[Tuple[str, bytes], _Stored] = {}
        self.maps: Dict[Tuple[str, bytes], Dict[bytes, _Stored]] = {}
        self.lists: Dict[Tuple[str, bytes], Tuple[List[bytes], int]] = {}
        self.timers: set = set()
        self.emitted: List[Event] = []
        self.side_outputs: List[Tuple[str, Event]] = []
        self.logs: List[Tuple[LogLevel, str]] = []
        self.batch_keys: List[bytes] = []

    # keys and value cells -------------------------------------------------

    def select_key(self, index: int, key: bytes) -> None:
        """Scope state to key ``index`` of the current batch (``state.select-key``)."""
        from .errors import StateError

        if not 0 <= index < len(self.batch_keys):
            raise StateError(f"key index {index} is not in the current batch")
        self.key = self.batch_keys[index]

    def _live(self, name: str, stored: Optional[_Stored]) -> bool:
        ttl = self.ttls.get(name)
        return stored is not None and (ttl is None or self.processing_time_ - stored.at < ttl.millis)

    def _renews_on_read(self, name: str) -> bool:
        ttl = self.ttls.get(name)
        return ttl is not None and ttl.update == TtlUpdate.ON_READ_AND_WRITE

    def prefetch(self, keys: Sequence[bytes]) -> _types.ValueCells:
        """What the real host reads ahead: the opened value states (except
        read-renewing ones) for every key."""
        states = [n for n, ttl in self.opened_values.items() if not self._renews_on_read(n)]
        present, values, ends = [], bytearray(), []
        for name in states:
            for key in keys:
                stored = self.values.get((name, key))
                live = self._live(name, stored)
                present.append(live)
                if live:
                    values += stored.value  # type: ignore[union-attr]
                ends.append(len(values))
        return _types.ValueCells(states, present, bytes(values), ends)

    def write_values(self, cells: List[Tuple[int, int]], writes: Any) -> None:
        """Apply a batch's buffered value-state writes (``state.write-values``)."""
        start = 0
        for i, (s, k) in enumerate(cells):
            end = writes.ends[i]
            slot = (writes.states[s], self.batch_keys[k])
            if writes.present[i]:
                self.values[slot] = _Stored(bytes(writes.values[start:end]), self.processing_time_)
            else:
                self.values.pop(slot, None)
            start = end

    def _slot(self, name: str) -> Tuple[str, bytes]:
        from .errors import StateError

        if self.key is None:
            raise StateError("state used outside of `process`")
        return (name, self.key)

    def open_value(self, name: str, ttl: Optional[Ttl]) -> Any:
        """Open a value state (``value-state.open``); the harness reads it ahead from now on."""
        self.ttls[name] = ttl
        self.opened_values[name] = ttl
        return _ValueHandle(self, name)

    def open_map(self, name: str, ttl: Optional[Ttl]) -> Any:
        """Open a map state (``map-state.open``)."""
        self.ttls[name] = ttl
        return _MapHandle(self, name)

    def open_list(self, name: str, ttl: Optional[Ttl]) -> Any:
        """Open a list state (``list-state.open``)."""
        self.ttls[name] = ttl
        return _ListHandle(self, name)

    # timers and context ---------------------------------------------------

    def register_timer(self, domain: int, timestamp: int) -> None:
        """Register a timer for the current key (``timers.register``)."""
        from .errors import StateError

        if self.key is None:
            raise StateError("timers used outside of `process`")
        self.timers.add((int(domain), timestamp, self.key))

    def delete_timer(self, domain: int, timestamp: int) -> None:
        """Delete a timer of the current key (``timers.delete``)."""
        if self.key is not None:
            self.timers.discard((int(domain), timestamp, self.key))

    def emit_batch(self, batch: Any) -> None:
        """Collect a call's outputs (``context.emit-batch``)."""
        self.emitted.extend(_unpack(batch))

    def emit_to(self, name: str, event: Any) -> None:
        """Collect a side output (``context.emit-to``)."""
        self.side_outputs.append((name, Event(event.value, event.timestamp, event.key, list(event.headers))))

    def current_watermark(self) -> int:
        """The watermark the harness set (``context.current-watermark``)."""
        return self.watermark

    def processing_time(self) -> int:
        """The processing time the harness set (``context.processing-time``)."""
        return self.processing_time_

    def log(self, level: int, message: str) -> None:
        """Collect a log line (``context.log``)."""
        self.logs.append((LogLevel(int(level)), message))


class _ValueHandle:
    """A value-state resource of the in-memory host."""

    def __init__(self, host: MockHost, name: str) -> None:
        self.host, self.name = host, name

    def get(self) -> Optional[bytes]:
        slot = self.host._slot(self.name)
        stored = self.host.values.get(slot)
        if not self.host._live(self.name, stored):
            return None
        if self.host._renews_on_read(self.name):
            stored.at = self.host.processing_time_  # type: ignore[union-attr]
        return stored.value  # type: ignore[union-attr]

    def set(self, value: bytes) -> None:
        self.host.values[self.host._slot(self.name)] = _Stored(bytes(value), self.host.processing_time_)

    def clear(self) -> None:
        self.host.values.pop(self.host._slot(self.name), None)


class _MapHandle:
    """A map-state resource of the in-memory host."""

    def __init__(self, host: MockHost, name: str) -> None:
        self.host, self.name = host, name

    def _map(self) -> Dict[bytes, _Stored]:
        m = self.host.maps.setdefault(self.host._slot(self.name), {})
        for k in [k for k, v in m.items() if not self.host._live(self.name, v)]:
            del m[k]
        return m

    def get(self, key: bytes) -> Optional[bytes]:
        stored = self._map().get(key)
        if stored is not None and self.host._renews_on_read(self.name):
            stored.at = self.host.processing_time_
        return None if stored is None else stored.value

    def put(self, key: bytes, value: bytes) -> None:
        self._map()[bytes(key)] = _Stored(bytes(value), self.host.processing_time_)

    def remove(self, key: bytes) -> None:
        self._map().pop(key, None)

    def contains(self, key: bytes) -> bool:
        return key in self._map()

    def entries(self, start_after: Optional[bytes], limit: int) -> List[Tuple[bytes, bytes]]:
        items = sorted(self._map().items())
        if start_after is not None:
            items = [(k, v) for k, v in items if k > start_after]
        return [(k, v.value) for k, v in items[:limit]]

    def is_empty(self) -> bool:
        return not self._map()

    def clear(self) -> None:
        self.host.maps.pop(self.host._slot(self.name), None)


class _ListHandle:
    """A list-state resource of the in-memory host."""

    def __init__(self, host: MockHost, name: str) -> None:
        self.host, self.name = host, name

    def _list(self) -> List[bytes]:
        slot = self.host._slot(self.name)
        values, at = self.host.lists.get(slot, ([], self.host.processing_time_))
        if not self.host._live(self.name, _Stored(None, at)):
            values = []
        return values

    def _store(self, values: List[bytes]) -> None:
        self.host.lists[self.host._slot(self.name)] = (values, self.host.processing_time_)

    def add(self, value: bytes) -> None:
        self._store(self._list() + [bytes(value)])

    def add_all(self, values: List[bytes]) -> None:
        self._store(self._list() + [bytes(v) for v in values])

    def get(self) -> List[bytes]:
        return list(self._list())

    def update(self, values: List[bytes]) -> None:
        self._store([bytes(v) for v in values])

    def clear(self) -> None:
        self.host.lists.pop(self.host._slot(self.name), None)


class Harness:
    """One function instance wired to a fresh in-memory host.

    Each method packs its input as the host would, runs the SDK's glue and
    returns what the function emitted to the main output. A failing call
    raises :class:`weir.FunctionError` (its ``__cause__`` is the function's
    exception)."""

    def __init__(self, cls: Type[Any]) -> None:
        """A new instance of the function class ``cls`` over empty state."""
        self.host = MockHost()
        _host.install(self.host)
        self._guest = Guest(cls)

    @property
    def function(self) -> Any:
        """The function instance, to inspect it or call its methods."""
        return self._guest.fn

    def _activate(self, keys: Sequence[bytes] = ()) -> None:
        if _host.HOST is not self.host:
            _host.install(self.host)
        self.host.batch_keys = list(keys)
        self.host.key = None

    def _take(self) -> List[Event]:
        out, self.host.emitted = self.host.emitted, []
        return out

    # clocks ---------------------------------------------------------------

    def set_watermark(self, watermark: int) -> None:
        """Set what ``ctx.current_watermark()`` reports."""
        self.host.watermark = watermark

    def set_processing_time(self, time: int) -> None:
        """Set what ``ctx.processing_time()`` reports (and what TTLs count in)."""
        self.host.processing_time_ = time

    # roles ------------------------------------------------------------------

    def key(self, event: EventLike) -> bytes:
        """The key the function computes for ``event``."""
        return self.keys([event])[0]

    def keys(self, events: Iterable[EventLike]) -> List[bytes]:
        """The keys of a batch of events."""
        self._activate()
        packed = self._guest.extract_keys(pack_events([_event(e) for e in events]))
        out, start = [], 0
        for end in packed.ends:
            out.append(bytes(packed.bytes[start:end]))
            start = end
        return out

    def process(self, key: Union[bytes, str], events: Iterable[EventLike]) -> List[Event]:
        """Run ``process`` for ``key``'s ``events``; the outputs."""
        return self.process_batch([(key, events)])

    def process_batch(self, batch: Sequence[Tuple[Union[bytes, str], Iterable[EventLike]]]) -> List[Event]:
        """Run ``process`` over several keys in one call, as the host does."""
        keys = [k.encode() if isinstance(k, str) else bytes(k) for k, _ in batch]
        self._activate(keys)
        events: List[Event] = []
        ends: List[int] = []
        kbytes, kends = bytearray(), []
        for key, group in zip(keys, (g for _, g in batch)):
            events.extend(_event(e) for e in group)
            ends.append(len(events))
            kbytes += key
            kends.append(len(kbytes))
        self._guest.process(
            _types.KeyedBatch(
                _types.PackedKeys(bytes(kbytes), kends), ends, pack_events(events), self.host.prefetch(keys)
            )
        )
        return self._take()

    def advance_watermark(self, watermark: int) -> List[Event]:
        """Move the watermark and fire every event-time timer at or before
        it, in timestamp order (including timers registered while firing)."""
        self.set_watermark(watermark)
        return self._fire(TimeDomain.EVENT_TIME, watermark)

    def advance_processing_time(self, time: int) -> List[Event]:
        """Move processing time and fire every processing-time timer at or
        before it."""
        self.set_processing_time(time)
        return self._fire(TimeDomain.PROCESSING_TIME, time)

    def _fire(self, domain: TimeDomain, upto: int) -> List[Event]:
        out: List[Event] = []
        while True:
            due = sorted((t, k) for d, t, k in self.host.timers if d == domain and t <= upto)
            if not due:
                return out
            timestamp, key = due[0]
            self.host.timers.discard((int(domain), timestamp, key))
            self._activate([key])
            self._guest.on_timers([_types.KeyedTimers(key, [_types.FiredTimer(timestamp, int(domain))])])
            out.extend(self._take())

    def pending_timers(self) -> List[Tuple[TimeDomain, int, bytes]]:
        """Registered timers not yet fired: (domain, timestamp, key), sorted."""
        return sorted((TimeDomain(d), t, k) for d, t, k in self.host.timers)

    def aggregate(self, key: Union[bytes, str], window: Window, events: Iterable[EventLike]) -> List[Event]:
        """Fold ``events`` into a new accumulator for ``key``'s ``window``
        (one ``add`` call) and return the window's result."""
        key = key.encode() if isinstance(key, str) else bytes(key)
        self._activate()
        evs = [_event(e) for e in events]
        cells = self._guest.add(
            _types.AccumulateBatch(_types.ValueCells([], [], b"", []), [len(evs)], pack_events(evs))
        )
        acc = bytes(cells.values[: cells.ends[0]])
        return self.results([(key, window, acc)])

    def results(self, windows: Sequence[Tuple[bytes, Window, bytes]]) -> List[Event]:
        """The outputs of finished windows given their encoded accumulators."""
        self._activate()
        kbytes, kends, accs, aends, wins = bytearray(), [], bytearray(), [], []
        for key, window, acc in windows:
            kbytes += key
            kends.append(len(kbytes))
            accs += acc
            aends.append(len(accs))
            wins.append(_types.Window(window.start, window.end))
        return _unpack(
            self._guest.results(
                _types.WindowResults(_types.PackedKeys(bytes(kbytes), kends), wins, bytes(accs), aends)
            )
        )

    def transform(self, events: Iterable[EventLike]) -> List[Event]:
        """Run a transform over ``events``; all outputs in order."""
        self._activate()
        return _unpack(self._guest.transform(pack_events([_event(e) for e in events])))

    # inspecting -------------------------------------------------------------

    def value(self, key: Union[bytes, str], name: str, codec: Codec[Any] = JSON) -> Any:
        """The value state ``name`` of ``key``, decoded (``None`` if unset or expired)."""
        key = key.encode() if isinstance(key, str) else bytes(key)
        stored = self.host.values.get((name, key))
        if not self.host._live(name, stored):
            return None
        return codec.decode(stored.value)  # type: ignore[union-attr]

    def map(self, key: Union[bytes, str], name: str, codec: Codec[Any] = JSON, key_codec: Codec[Any] = JSON) -> Dict[Any, Any]:
        """The map state ``name`` of ``key``, decoded."""
        key = key.encode() if isinstance(key, str) else bytes(key)
        m = self.host.maps.get((name, key), {})
        return {key_codec.decode(k): codec.decode(v.value) for k, v in sorted(m.items()) if self.host._live(name, v)}

    def list(self, key: Union[bytes, str], name: str, codec: Codec[Any] = JSON) -> List[Any]:
        """The list state ``name`` of ``key``, decoded."""
        key = key.encode() if isinstance(key, str) else bytes(key)
        values, at = self.host.lists.get((name, key), ([], 0))
        return [codec.decode(v) for v in values] if self.host._live(name, _Stored(None, at)) else []

    def side_output(self, name: str) -> List[Event]:
        """Events sent to the side output ``name`` so far (taking them)."""
        taken = [e for n, e in self.host.side_outputs if n == name]
        self.host.side_outputs = [(n, e) for n, e in self.host.side_outputs if n != name]
        return taken

    @property
    def logs(self) -> List[Tuple[LogLevel, str]]:
        """Log lines written so far."""
        return list(self.host.logs)
