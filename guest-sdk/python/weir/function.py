"""The roles a function class implements, and the ``@function`` marker.

Subclass one or more roles and mark the class with :func:`function`::

    @function
    class Revenue(KeyFunction, ProcessFunction):
        def key(self, event): ...
        def process(self, key, events, ctx): ...

A class implementing both ``KeyFunction`` and ``ProcessFunction`` serves as
both ``key:`` and ``process:`` of a pipeline spec; ``python -m weir build``
exports exactly the roles the class implements.
"""

from __future__ import annotations

from typing import Any, Dict, Generic, Iterable, List, Optional, Type, TypeVar, Union

from ._roles import ROLES as _TABLE
from .codec import JSON, Codec
from .context import Context, Emitter
from .event import Event, Events, FiredTimer, Window

A = TypeVar("A")
C = TypeVar("C", bound=type)


class KeyFunction:
    """Computes the key a keyed pipeline partitions events by. Events with
    equal keys share state and are processed in order by one subtask."""

    def key(self, event: Event) -> Union[bytes, str]:
        """The key of ``event`` (``str`` keys are stored as UTF-8)."""
        raise NotImplementedError

    def keys(self, events: Events) -> Iterable[Union[bytes, str]]:
        """The keys of a whole batch, in order: what the host calls. By
        default :meth:`key` per event; override it to skip making
        :class:`Event` objects (see :class:`Events`)."""
        key = self.key
        return [key(event) for event in events]


class ProcessFunction:
    """Processes the events of one key with that key's state and timers."""

    def process(self, key: bytes, events: Events, ctx: Context) -> None:
        """Handle ``events`` (oldest first) of ``key``. State handles read
        and write ``key``'s state; outputs go through ``ctx``."""
        raise NotImplementedError

    def on_timer(self, key: bytes, timer: FiredTimer, ctx: Context) -> None:
        """A timer registered for ``key`` fired. Does nothing by default."""


class TransformFunction:
    """A stateless map, filter or flat-map, run in the stage before it."""

    def transform(self, event: Event, out: Emitter) -> None:
        """Emit the outputs of ``event`` into ``out``: none filters it out,
        one maps it, several flat-map it."""
        raise NotImplementedError


class AggregateFunction(Generic[A]):
    """A window aggregate: the host assigns events to windows and keeps one
    accumulator per (key, window), stored with :attr:`codec` (compact JSON
    by default); this folds events into accumulators and turns a finished
    window's accumulator into outputs."""

    #: How accumulators are stored (JSON unless overridden).
    codec: Codec[Any] = JSON

    def create_accumulator(self) -> A:
        """A new window's accumulator."""
        raise NotImplementedError

    def add(self, accumulator: A, event: Event) -> A:
        """``accumulator`` with ``event`` folded in (return it)."""
        raise NotImplementedError

    def add_all(self, accumulator: A, events: Events) -> A:
        """``accumulator`` with all of a window's new ``events`` folded in:
        what the host calls. By default :meth:`add` per event."""
        add = self.add
        for event in events:
            accumulator = add(accumulator, event)
        return accumulator

    def merge(self, a: A, b: A) -> A:
        """Two accumulators combined (when session windows merge)."""
        raise NotImplementedError

    def result(self, key: bytes, window: Window, accumulator: A) -> Union[Event, Iterable[Event], None]:
        """The output of ``key``'s finished ``window``: an event, several, or
        none (fired again with the updated accumulator when a late event
        arrives within the allowed lateness)."""
        raise NotImplementedError


#: Each role's class and the methods it must define (``a|b``: one of
#: them), in the order roles are listed. The kinds themselves (which exist,
#: what they export) are the rows of ``wit/roles.toml`` (``_roles.py``).
_REQUIRED: Dict[type, List[str]] = {
    KeyFunction: ["key|keys"],
    ProcessFunction: ["process"],
    AggregateFunction: ["create_accumulator", "add|add_all", "merge", "result"],
    TransformFunction: ["transform"],
}

_EXPORTS = {row.cls: row.export for row in _TABLE}

#: Each role and the WIT interface a component exports for it.
ROLES: Dict[type, str] = {role: _EXPORTS[role.__name__] for role in _REQUIRED}


def _role_list(prefix: str = "") -> str:
    """The role classes, for messages: ``KeyFunction, … or TransformFunction``."""
    names = [prefix + role.__name__ for role in ROLES]
    return " or ".join([", ".join(names[:-1]), names[-1]]) if len(names) > 1 else "".join(names)


def roles(cls: type) -> List[str]:
    """The WIT interfaces ``cls`` exports (``key-fn``, ``process-fn``, …)."""
    return [name for role, name in ROLES.items() if isinstance(cls, type) and issubclass(cls, role)]


def _check(cls: type) -> None:
    found = [role for role in ROLES if issubclass(cls, role)]
    if not found:
        raise TypeError(f"{cls.__name__} implements no role: subclass {_role_list()}")
    for role in found:
        for alternatives in _REQUIRED[role]:
            names = alternatives.split("|")
            if all(getattr(cls, n) is getattr(role, n) for n in names):
                raise TypeError(f"{cls.__name__} is a {role.__name__} but does not define {' or '.join(names)}()")


def function(cls: C) -> C:
    """Mark ``cls`` as a Weir function, checking that it implements at
    least one role with its methods. It must be constructible with no
    arguments (the SDK creates one instance per component instance)."""
    _check(cls)
    cls.__weir_function__ = True  # type: ignore[attr-defined]
    return cls


def find_function(module: Any) -> Optional[type]:
    """The class marked with :func:`function` in ``module``, if exactly one."""
    marked = [
        v
        for v in vars(module).values()
        if isinstance(v, type) and v.__dict__.get("__weir_function__") and v.__module__ == module.__name__
    ]
    return marked[0] if len(marked) == 1 else None


def instantiate(cls: Type[Any]) -> Any:
    """One instance of the function class ``cls``."""
    _check(cls)
    return cls()
