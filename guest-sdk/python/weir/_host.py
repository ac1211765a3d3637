"""The host the SDK talks to (the component's imports, or the in-memory
test host) and the state of the current call.

Value states are served from the batch, as the Rust SDK's
``host/wasm.rs`` does: the host sends, with each ``process`` batch, the
values of the value states the function has opened for every key of the
batch (``keyed-batch.prefetched``). Reads are answered from there and
writes are collected and sent back with one ``state.write-values`` call
at the end of the call. ``state.select-key`` is called only before a call
that needs it (map and list state, timers, value states not read ahead).
"""

from __future__ import annotations

from typing import Any, List, Optional, Tuple

#: The host backend in use (set by :func:`install`).
HOST: Any = None
#: Bumped by every :func:`install`, so state handles know to reopen.
EPOCH = 0


class CallState:
    """What the SDK knows of the current call."""

    __slots__ = (
        "generation",
        "current",
        "current_key",
        "selected",
        "keys",
        "prefetched",
        "pindex",
        "latest",
        "cells",
        "present",
        "values",
        "ends",
    )

    def __init__(self) -> None:
        self.generation = 0
        self.current: Optional[int] = None
        self.current_key: bytes = b""
        self.selected: Optional[int] = None
        self.keys = 0
        self.prefetched: Any = None
        self.pindex: dict = {}
        self.latest: List[int] = []
        self.cells: List[Tuple[int, int]] = []
        self.present: List[bool] = []
        self.values = bytearray()
        self.ends: List[int] = []


B = CallState()


def install(host: Any) -> None:
    """Make ``host`` the backend of every state handle and context."""
    global HOST, EPOCH
    HOST = host
    EPOCH += 1
    B.prefetched = None
    B.current = None
    B.selected = None


def begin_batch(prefetched: Any, keys: int) -> None:
    """A call begins: ``prefetched`` holds the host's read-ahead values for
    its ``keys`` keys (``None``: nothing read ahead)."""
    B.generation += 1
    B.current = None
    B.selected = None
    B.keys = keys
    if prefetched is not None and prefetched.states:
        B.pindex = {name: i for i, name in enumerate(prefetched.states)}
        B.latest = [-1] * (len(prefetched.states) * keys)
    else:
        B.pindex = {}
        B.latest = []
    B.prefetched = prefetched
    B.cells = []
    B.present = []
    B.values = bytearray()
    B.ends = []


def end_batch() -> None:
    """The call ends: send the buffered value writes with one host call."""
    prefetched = B.prefetched
    B.prefetched = None
    B.current = None
    B.selected = None
    if not B.cells:
        return
    cells, B.cells = B.cells, []
    HOST.write_values(
        cells,
        HOST.types.ValueCells(list(prefetched.states), B.present, bytes(B.values), B.ends),
    )


def select_key(index: int, key: bytes) -> None:
    """Scope state to entry ``index`` (key ``key``) of the current batch;
    the host hears of it when a call needs it."""
    B.current = index
    B.current_key = key


def selected() -> None:
    """Make sure the host has the current key selected before a state call."""
    current = B.current
    if current is not None and B.selected != current:
        HOST.select_key(current, B.current_key)
        B.selected = current


def report_current_key() -> None:
    """Select the current key with the host before reporting an error, so
    the host can name the key."""
    try:
        selected()
    except Exception:  # noqa: BLE001 - the original error matters more
        pass
