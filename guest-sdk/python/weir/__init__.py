"""Weir's Python guest SDK: write keyed stream functions in Python and run
them as Wasm components in Weir.

>>> from weir import function, KeyFunction, ProcessFunction, ValueState
>>> @function
... class Count(KeyFunction, ProcessFunction):
...     def __init__(self):
...         self.seen = ValueState("seen")
...     def key(self, event):
...         return event.value[:1]
...     def process(self, key, events, ctx):
...         seen = self.seen.get(0) + len(events)
...         self.seen.set(seen)
...         ctx.emit(str(seen), events[-1].timestamp)

Test with :class:`weir.testing.Harness`; build with
``python -m weir build PROJECT -o OUT.wasm``.
"""

from .codec import JSON, RAW, Codec
from .context import Context, Emitter
from .errors import FunctionError, StateError, WeirError
from .event import Event, Events, FiredTimer, LogLevel, TimeDomain, Window
from .function import AggregateFunction, KeyFunction, ProcessFunction, TransformFunction, function
from .money import Cents
from .state import ListState, MapState, Ttl, TtlUpdate, ValueState

__version__ = "0.2.0"

__all__ = [
    "AggregateFunction",
    "Cents",
    "Codec",
    "Context",
    "Emitter",
    "Event",
    "Events",
    "FiredTimer",
    "FunctionError",
    "JSON",
    "KeyFunction",
    "ListState",
    "LogLevel",
    "MapState",
    "ProcessFunction",
    "RAW",
    "StateError",
    "TimeDomain",
    "TransformFunction",
    "Ttl",
    "TtlUpdate",
    "ValueState",
    "Window",
    "WeirError",
    "function",
]
