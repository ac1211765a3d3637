"""The function kinds this SDK implements: its rows of ``wit/roles.toml``,
the table of kinds that the host and every SDK take theirs from.

Generated from the table by ``tests/test_sdk_roles.py``, which fails while
they disagree (``WEIR_BLESS=1`` makes it write this file). Do not edit.
"""

from typing import NamedTuple, Optional, Tuple


class Role(NamedTuple):
    """One kind of function: a row of ``wit/roles.toml``."""

    #: The kind (``key``, ``process``, …).
    name: str
    #: What it does.
    doc: str
    #: The pipeline spec field that names such a function.
    spec: str
    #: The class a function subclasses for it (``KeyFunction``).
    cls: str
    #: The WIT world of a component of this kind alone.
    world: str
    #: The interface it exports.
    export: str
    #: A kind whose exports it needs too.
    extends: Optional[str]
    #: The host interfaces its world imports (besides ``types``).
    imports: Tuple[str, ...]
    #: What it is called with (``events``, ``keyed``, ``windowed``, …).
    inputs: str


#: The kinds, in the table's order.
ROLES: Tuple[Role, ...] = (
    Role(
        name="key",
        doc="Computes keys",
        spec="key",
        cls="KeyFunction",
        world="key-function",
        export="key-fn",
        extends=None,
        imports=("context",),
        inputs="events",
    ),
    Role(
        name="transform",
        doc="Transforms events without state (map, filter, flat-map)",
        spec="transform",
        cls="TransformFunction",
        world="transform-function",
        export="transform-fn",
        extends=None,
        imports=("context",),
        inputs="events",
    ),
    Role(
        name="process",
        doc="Processes keyed events",
        spec="process",
        cls="ProcessFunction",
        world="process-function",
        export="process-fn",
        extends=None,
        imports=("state", "timers", "context"),
        inputs="keyed",
    ),
    Role(
        name="aggregate",
        doc="Aggregates windows",
        spec="aggregate",
        cls="AggregateFunction",
        world="aggregate-function",
        export="aggregate-fn",
        extends=None,
        imports=("context",),
        inputs="windowed",
    ),
)
