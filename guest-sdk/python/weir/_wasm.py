"""The host inside a component: calls to the imports componentize-py
generated (``wit_world.imports``). Only the generated app shim imports
this module."""

from __future__ import annotations

import sys
from typing import Any, List, Tuple

from componentize_py_types import Err  # type: ignore[import-not-found]
from wit_world.imports import context, types  # type: ignore[import-not-found]

from . import _host
from .errors import FunctionError, StateError

try:  # absent from worlds without keyed state (key, aggregate, transform)
    from wit_world.imports import state as _state  # type: ignore[import-not-found]
    from wit_world.imports import timers as _timers  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover - depends on the world
    _state = None
    _timers = None

_LEVELS = [
    types.LogLevel.TRACE,
    types.LogLevel.DEBUG,
    types.LogLevel.INFO,
    types.LogLevel.WARN,
    types.LogLevel.ERROR,
]
_DOMAINS = [types.TimeDomain.EVENT_TIME, types.TimeDomain.PROCESSING_TIME]


def _state_error(error: Any) -> StateError:
    kind = type(error).__name__.rsplit("_", 1)[-1]
    value = getattr(error, "value", None)
    messages = {
        "InvalidName": f"invalid state name {value!r}",
        "InvalidTtl": "a time to live must be at least a millisecond",
        "TooLarge": f"state key or value larger than the host's limit of {value} bytes",
        "NoCurrentKey": "state used outside of `process`",
        "UnknownKey": f"key index {value} is not in the current batch",
        "Backend": f"state backend: {value}",
    }
    return StateError(messages.get(kind, f"state error {error!r}"))


class _Checked:
    """A resource whose calls raise :class:`StateError` instead of ``Err``."""

    __slots__ = ("_r",)

    def __init__(self, resource: Any) -> None:
        self._r = resource

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._r, name)

        def call(*args: Any) -> Any:
            try:
                return method(*args)
            except Err as e:
                raise _state_error(e.value) from None

        return call


def _ttl(ttl: Any) -> Any:
    if ttl is None:
        return None
    updates = [_state.TtlUpdate.ON_CREATE_AND_WRITE, _state.TtlUpdate.ON_READ_AND_WRITE]
    return _state.Ttl(ttl.millis, updates[int(ttl.update)])


def _need_state() -> None:
    if _state is None:
        raise StateError("keyed state and timers are only available to process functions")


class WasmHost:
    """The component's imports, as the SDK's host interface."""

    types = types

    def select_key(self, index: int, key: bytes) -> None:
        _need_state()
        try:
            _state.select_key(index)
        except Err as e:
            raise _state_error(e.value) from None

    def write_values(self, cells: List[Tuple[int, int]], writes: Any) -> None:
        try:
            _state.write_values(cells, writes)
        except Err as e:
            raise _state_error(e.value) from None

    def _open(self, cls: Any, name: str, ttl: Any) -> Any:
        _need_state()
        try:
            return _Checked(cls.open(name, _ttl(ttl)))
        except Err as e:
            raise _state_error(e.value) from None

    def open_value(self, name: str, ttl: Any) -> Any:
        _need_state()
        return self._open(_state.ValueState, name, ttl)

    def open_map(self, name: str, ttl: Any) -> Any:
        _need_state()
        return self._open(_state.MapState, name, ttl)

    def open_list(self, name: str, ttl: Any) -> Any:
        _need_state()
        return self._open(_state.ListState, name, ttl)

    def register_timer(self, domain: int, timestamp: int) -> None:
        _need_state()
        try:
            _timers.register(_DOMAINS[domain], timestamp)
        except Err as e:
            raise _state_error(e.value) from None

    def delete_timer(self, domain: int, timestamp: int) -> None:
        _need_state()
        try:
            _timers.delete(_DOMAINS[domain], timestamp)
        except Err as e:
            raise _state_error(e.value) from None

    def emit_batch(self, batch: Any) -> None:
        context.emit_batch(batch)

    def emit_to(self, name: str, event: Any) -> None:
        context.emit_to(name, event)

    def current_watermark(self) -> int:
        return context.current_watermark()

    def processing_time(self) -> int:
        return context.processing_time()

    def log(self, level: int, message: str) -> None:
        context.log(_LEVELS[int(level)], message)


class _LogStream:
    """``sys.stdout``/``sys.stderr`` inside a component (no WASI stdio):
    complete lines go to ``context.log``."""

    def __init__(self, level: int) -> None:
        self.level = level
        self.pending = ""

    def write(self, text: str) -> int:
        self.pending += text
        while "\n" in self.pending:
            line, self.pending = self.pending.split("\n", 1)
            context.log(_LEVELS[self.level], line)
        return len(text)

    def flush(self) -> None:
        if self.pending:
            context.log(_LEVELS[self.level], self.pending)
            self.pending = ""

    def isatty(self) -> bool:
        return False


def _fail(error: FunctionError) -> Err:
    return Err(types.FunctionError(str(error)))


def install() -> None:
    """Make the component's imports the SDK's host and route ``print``
    to the host's log."""
    _host.install(WasmHost())
    sys.stdout = _LogStream(2)  # type: ignore[assignment]
    sys.stderr = _LogStream(3)  # type: ignore[assignment]


def call(method: Any, *args: Any) -> Any:
    """Run a glue method, turning a :class:`FunctionError` into the
    ``function-error`` result the host expects."""
    try:
        return method(*args)
    except FunctionError as error:
        raise _fail(error) from None
