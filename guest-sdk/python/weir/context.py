"""What a handler may ask of the host while it runs: emit outputs, read
event time, set timers, log."""

from __future__ import annotations

from typing import Any, List, Optional, Tuple, Union

from . import _host
from .event import Event, LogLevel, TimeDomain

Output = Union[bytes, bytearray, memoryview, str, Event]


class Emitter:
    """Collects outputs, packed as they come (one ``bytearray`` of values
    and a list of their ends), and hands them to the host once per call."""

    __slots__ = ("_values", "_ends", "_stamps", "_keyed", "_keys", "_key_ends", "_headers")

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self._values = bytearray()
        self._ends: List[int] = []
        self._stamps: List[int] = []
        self._keyed: List[int] = []
        self._keys = bytearray()
        self._key_ends: List[int] = []
        self._headers: List[Tuple[int, str, bytes]] = []

    def emit(self, output: Output, timestamp: Optional[int] = None) -> None:
        """Send ``output`` to the main output: an :class:`Event`, or a value
        (``bytes`` or ``str``, UTF-8) with its event ``timestamp``."""
        if type(output) is bytes:
            if timestamp is None:
                raise TypeError("emit(value, timestamp): a value needs its timestamp")
            values = self._values
            values += output
            self._ends.append(len(values))
            self._stamps.append(timestamp)
            return
        if isinstance(output, Event):
            index = len(self._ends)
            self._values += output.value
            self._ends.append(len(self._values))
            self._stamps.append(output.timestamp if timestamp is None else timestamp)
            if output.key is not None:
                self._keyed.append(index)
                self._keys += output.key
                self._key_ends.append(len(self._keys))
            for name, value in output.headers:
                self._headers.append((index, name, bytes(value)))
            return
        if timestamp is None:
            raise TypeError("emit(value, timestamp): a value needs its timestamp")
        self._values += output.encode() if isinstance(output, str) else output
        self._ends.append(len(self._values))
        self._stamps.append(timestamp)

    def emit_fixed(self, data: Union[bytes, bytearray, memoryview], size: int, timestamps: List[int]) -> None:
        """Send ``len(timestamps)`` outputs of ``size`` bytes each, packed back
        to back in ``data``, with their ``timestamps``: one call instead of
        one per output, for fixed-size binary records."""
        count = len(timestamps)
        if len(data) != size * count:
            raise ValueError(f"emit_fixed: {len(data)} bytes are not {count} outputs of {size} bytes")
        values = self._values
        base = len(values)
        values += data
        self._ends.extend(range(base + size, base + size * count + 1, size))
        self._stamps.extend(timestamps)

    def emit_to(self, name: str, output: Output, timestamp: Optional[int] = None) -> None:
        """Send ``output`` to the side output called ``name`` (declared in
        the pipeline spec; outputs for undeclared ones are counted and
        dropped)."""
        if not isinstance(output, Event):
            if timestamp is None:
                raise TypeError("emit_to(name, value, timestamp): a value needs its timestamp")
            output = Event(output, timestamp)
        elif timestamp is not None:
            output = Event(output.value, timestamp, output.key, output.headers)
        _host.HOST.emit_to(
            name,
            _host.HOST.types.Event(
                output.key, output.value, output.timestamp, [(n, bytes(v)) for n, v in output.headers]
            ),
        )

    def _batch(self) -> Any:
        return _host.HOST.types.EventBatch(
            bytes(self._values),
            self._ends,
            self._stamps,
            self._keyed,
            bytes(self._keys),
            self._key_ends,
            self._headers,
        )

    def _flush(self) -> None:
        if self._ends:
            _host.HOST.emit_batch(self._batch())
        self._reset()


class Context(Emitter):
    """The handle a process function uses to talk to the host during a call.

    Outputs are buffered and handed to the host once per call, so emitting
    one output per event crosses the Wasm boundary once per batch."""

    __slots__ = ()

    def current_watermark(self) -> int:
        """The event-time watermark (ms since the epoch); ``-2**63`` before
        the first watermark."""
        return int(_host.HOST.current_watermark())

    def processing_time(self) -> int:
        """The host's processing time (ms since the epoch), fixed for one call."""
        return int(_host.HOST.processing_time())

    def register_event_time_timer(self, timestamp: int) -> None:
        """Call ``on_timer`` for the current key once the watermark reaches
        ``timestamp`` (registering it twice fires once)."""
        _host.selected()
        _host.HOST.register_timer(TimeDomain.EVENT_TIME, timestamp)

    def register_processing_time_timer(self, timestamp: int) -> None:
        """Call ``on_timer`` for the current key once processing time
        reaches ``timestamp``."""
        _host.selected()
        _host.HOST.register_timer(TimeDomain.PROCESSING_TIME, timestamp)

    def delete_event_time_timer(self, timestamp: int) -> None:
        """Cancel the current key's event-time timer at ``timestamp``."""
        _host.selected()
        _host.HOST.delete_timer(TimeDomain.EVENT_TIME, timestamp)

    def delete_processing_time_timer(self, timestamp: int) -> None:
        """Cancel the current key's processing-time timer at ``timestamp``."""
        _host.selected()
        _host.HOST.delete_timer(TimeDomain.PROCESSING_TIME, timestamp)

    def log(self, message: str, level: LogLevel = LogLevel.INFO) -> None:
        """Write a line to the host's log (``print`` goes there too, at INFO)."""
        _host.HOST.log(level, message)
