"""Plain-Python twins of the WIT records (``weir:function/types``).

The in-memory test host passes these to the SDK's glue where the
component passes componentize-py's generated classes: same names, same
fields, so the glue runs unchanged natively and in the component.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Optional, Tuple


@dataclass
class Event:
    """One record (``types.event``)."""

    key: Optional[bytes]
    value: bytes
    timestamp: int
    headers: List[Tuple[str, bytes]] = field(default_factory=list)


@dataclass
class EventBatch:
    """Events packed in flat lists (``types.event-batch``)."""

    values: bytes
    value_ends: List[int]
    timestamps: List[int]
    keyed: List[int]
    keys: bytes
    key_ends: List[int]
    headers: List[Tuple[int, str, bytes]]


@dataclass
class PackedKeys:
    """Keys packed back to back (``types.packed-keys``)."""

    bytes: bytes
    ends: List[int]


@dataclass
class ValueCells:
    """Value-state cells per (state, key) (``types.value-cells``)."""

    states: List[str]
    present: List[bool]
    values: bytes
    ends: List[int]


@dataclass
class KeyedBatch:
    """A process batch (``types.keyed-batch``)."""

    keys: PackedKeys
    event_ends: List[int]
    events: EventBatch
    prefetched: ValueCells


@dataclass
class Window:
    """A window (``types.window``)."""

    start: int
    end: int


@dataclass
class FiredTimer:
    """A fired timer (``types.fired-timer``); ``domain`` is 0 (event time) or 1."""

    timestamp: int
    domain: object


@dataclass
class KeyedTimers:
    """Fired timers of one key (``types.keyed-timers``)."""

    key: bytes
    timers: List[FiredTimer]


@dataclass
class AccumulateBatch:
    """Windows to fold (``types.accumulate-batch``)."""

    accumulators: ValueCells
    event_ends: List[int]
    events: EventBatch


@dataclass
class WindowResults:
    """Windows whose results are wanted (``types.window-results``)."""

    keys: PackedKeys
    windows: List[Window]
    accumulators: bytes
    accumulator_ends: List[int]
