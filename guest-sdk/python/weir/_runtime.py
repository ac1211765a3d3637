"""The glue that runs a function class for a batch from the host: the same
code in the component and under the test harness (which passes the same
packed batches from an in-memory host)."""

from __future__ import annotations

from itertools import accumulate
from typing import Any, Callable, Dict, List, Optional, Tuple

from . import _host
from .context import Context, Emitter
from .errors import FunctionError
from .event import Event, Events, FiredTimer, TimeDomain, Window, _Packed
from .function import AggregateFunction, instantiate


def _end_call(ctx: Context, failure: Optional[BaseException]) -> None:
    """End a keyed call: send the buffered state writes (kept even when the
    call failed, as without read-ahead), reset the context, and raise the
    call's first failure as a ``FunctionError``."""
    try:
        _host.end_batch()
    except Exception as error:  # noqa: BLE001 - reported to the host
        failure = failure or error
    ctx._reset()
    if failure is not None:
        raise FunctionError(_message(failure)) from failure


def _message(error: BaseException) -> str:
    text = str(error)
    name = type(error).__name__
    if isinstance(error, FunctionError):
        return text
    if isinstance(error, KeyError):
        return f"KeyError: missing {text}"
    return f"{name}: {text}" if text else name


#: The functions of each interface a role exports (``wit/roles.toml``), as
#: ``(method, parameters)`` of the export class ``python -m weir build``
#: writes for componentize-py; each calls the :class:`Guest` method of the
#: same name.
EXPORT_METHODS: Dict[str, List[Tuple[str, str]]] = {
    "key-fn": [("extract_keys", "events")],
    "process-fn": [("process", "batch"), ("on_timers", "batch")],
    "aggregate-fn": [("add", "batch"), ("merge", "a, b"), ("results", "batch")],
    "transform-fn": [("transform", "events")],
}


class Guest:
    """One function instance and the calls the host makes on it."""

    def __init__(self, cls: type) -> None:
        self.cls = cls
        self._fn: Any = None
        self.ctx = Context()

    @property
    def fn(self) -> Any:
        """The function instance (created on first use)."""
        if self._fn is None:
            self._fn = instantiate(self.cls)
        return self._fn

    # key-fn -------------------------------------------------------------

    def extract_keys(self, batch: Any) -> Any:
        """``key-fn.extract-keys``: one key per event, packed."""
        try:
            events = Events(_Packed(batch), 0, len(batch.value_ends))
            keys = self.fn.keys(events)
            if not isinstance(keys, list):
                keys = list(keys)
            try:  # C loops: no per-key Python bytecode
                out = b"".join(keys)
            except TypeError:
                keys = [k.encode() if isinstance(k, str) else bytes(k) for k in keys]
                out = b"".join(keys)
            ends = list(accumulate(map(len, keys)))
            if len(ends) != len(events):
                raise FunctionError(f"{len(ends)} keys for {len(events)} events")
        except Exception as error:  # noqa: BLE001 - reported to the host
            raise FunctionError(_message(error)) from error
        return _host.HOST.types.PackedKeys(out, ends)

    # process-fn ---------------------------------------------------------

    def process(self, batch: Any) -> None:
        """``process-fn.process``: per key, its events with its state."""
        self._keyed(batch, self.fn.process)

    def _keyed(self, batch: Any, handle: Callable[[bytes, Events, Context], None]) -> None:
        event_ends = batch.event_ends
        _host.begin_batch(batch.prefetched, len(event_ends))
        ctx = self.ctx
        ctx._reset()
        failure: Optional[BaseException] = None
        try:
            packed = _Packed(batch.events)
            kbytes, kends = batch.keys.bytes, batch.keys.ends
            start = kstart = 0
            call = _host.B  # select_key inlined: this loop runs once per key
            for index, end in enumerate(event_ends):
                kend = kends[index]
                key = kbytes[kstart:kend]
                kstart = kend
                call.current = index
                call.current_key = key
                handle(key, Events(packed, start, end), ctx)
                start = end
            ctx._flush()
        except Exception as error:  # noqa: BLE001 - reported to the host
            _host.report_current_key()
            failure = error
        _end_call(ctx, failure)

    def on_timers(self, batch: List[Any]) -> None:
        """``process-fn.on-timers``: per key, its fired timers in order."""
        _host.begin_batch(None, len(batch))
        ctx = self.ctx
        ctx._reset()
        failure: Optional[BaseException] = None
        on_timer = self.fn.on_timer
        try:
            for index, entry in enumerate(batch):
                key = bytes(entry.key)
                _host.select_key(index, key)
                for timer in entry.timers:
                    on_timer(key, FiredTimer(timer.timestamp, TimeDomain(_domain(timer.domain))), ctx)
            ctx._flush()
        except Exception as error:  # noqa: BLE001
            _host.report_current_key()
            failure = error
        _end_call(ctx, failure)

    # transform-fn -------------------------------------------------------

    def transform(self, batch: Any) -> Any:
        """``transform-fn.transform``: every event's outputs, packed."""
        out = Emitter()
        try:
            transform = self.fn.transform
            for event in Events(_Packed(batch), 0, len(batch.value_ends)):
                transform(event, out)
        except Exception as error:  # noqa: BLE001
            raise FunctionError(_message(error)) from error
        return out._batch()

    # aggregate-fn -------------------------------------------------------

    def add(self, batch: Any) -> Any:
        """``aggregate-fn.add``: every window's new accumulator, in one
        ``value-cells``."""
        fn: AggregateFunction[Any] = self.fn
        codec = fn.codec
        try:
            cells = batch.accumulators
            present, avalues, aends = cells.present, cells.values, cells.ends
            packed = _Packed(batch.events)
            out = bytearray()
            ends: List[int] = []
            start = 0
            for i, end in enumerate(batch.event_ends):
                if i < len(present) and present[i]:
                    acc = codec.decode(avalues[aends[i - 1] if i else 0 : aends[i]])
                else:
                    acc = fn.create_accumulator()
                acc = fn.add_all(acc, Events(packed, start, end))
                start = end
                out += codec.encode(acc)
                ends.append(len(out))
        except Exception as error:  # noqa: BLE001
            raise FunctionError(_message(error)) from error
        return _host.HOST.types.ValueCells([], [True] * len(ends), bytes(out), ends)

    def merge(self, a: bytes, b: bytes) -> bytes:
        """``aggregate-fn.merge``."""
        fn = self.fn
        try:
            return fn.codec.encode(fn.merge(fn.codec.decode(a), fn.codec.decode(b)))
        except Exception as error:  # noqa: BLE001
            raise FunctionError(_message(error)) from error

    def results(self, batch: Any) -> Any:
        """``aggregate-fn.results``: every finished window's outputs, packed."""
        fn = self.fn
        out = Emitter()
        try:
            kbytes, kends = batch.keys.bytes, batch.keys.ends
            accs, aends = batch.accumulators, batch.accumulator_ends
            for i, window in enumerate(batch.windows):
                key = kbytes[kends[i - 1] if i else 0 : kends[i]]
                acc = fn.codec.decode(accs[aends[i - 1] if i else 0 : aends[i]])
                produced = fn.result(key, Window(window.start, window.end), acc)
                if produced is None:
                    continue
                if isinstance(produced, Event):
                    out.emit(produced)
                else:
                    for event in produced:
                        out.emit(event)
        except Exception as error:  # noqa: BLE001
            raise FunctionError(_message(error)) from error
        return out._batch()


def _domain(domain: Any) -> int:
    """A WIT ``time-domain`` (an enum member, or an int natively) as 0 or 1."""
    return int(getattr(domain, "value", domain))
