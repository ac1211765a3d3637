"""The SDK's function kinds are the table's: ``weir/_roles.py`` is generated
from ``wit/roles.toml`` (the one table of kinds) and must match it, and the
SDK's own per-kind code covers exactly the kinds its rows name.

``WEIR_BLESS=1 python3 -m pytest guest-sdk/python/tests/test_sdk_roles.py``
writes ``weir/_roles.py`` from the table instead of failing.
"""

import importlib
import os
from pathlib import Path

import weir
from weir import _roles
from weir._runtime import EXPORT_METHODS, Guest

SDK = Path(weir.__file__).resolve().parent
TABLE = SDK / "wit" / "roles.toml"
MODULE = SDK / "_roles.py"

HEADER = '''"""The function kinds this SDK implements: its rows of ``wit/roles.toml``,
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
'''


def _table():
    try:
        import tomllib
    except ImportError:  # Python < 3.11
        import tomli as tomllib  # type: ignore[no-redef]
    with open(TABLE, "rb") as f:
        return tomllib.load(f)["role"]


def _text(value):
    return "None" if value is None else '"' + value + '"'


def render() -> str:
    """``weir/_roles.py`` as the table makes it."""
    out = [HEADER]
    for row in _table():
        if "python" not in row["sdks"]:
            continue
        imports = ", ".join(_text(i) for i in row["imports"]) + ("," if len(row["imports"]) == 1 else "")
        out.append(
            "    Role(\n"
            f"        name={_text(row['name'])},\n"
            f"        doc={_text(row['doc'])},\n"
            f"        spec={_text(row['spec'])},\n"
            f"        cls={_text(row['trait'])},\n"
            f"        world={_text(row['world'])},\n"
            f"        export={_text(row['export'])},\n"
            f"        extends={_text(row.get('extends'))},\n"
            f"        imports=({imports}),\n"
            f"        inputs={_text(row['inputs'])},\n"
            "    ),\n"
        )
    out.append(")\n")
    return "".join(out)


def test_the_generated_module_is_the_table():
    expected = render()
    if os.environ.get("WEIR_BLESS") == "1" and MODULE.read_text() != expected:
        MODULE.write_text(expected)
        importlib.reload(_roles)
    assert MODULE.read_text() == expected, (
        f"{MODULE} disagrees with {TABLE}: rerun this test with WEIR_BLESS=1 to regenerate it"
    )


def test_the_sdk_implements_exactly_its_rows():
    function = importlib.import_module("weir.function")
    rows = _roles.ROLES
    assert sorted(role.__name__ for role in function._REQUIRED) == sorted(row.cls for row in rows), (
        "weir/function.py's _REQUIRED has a class per row"
    )
    assert sorted(EXPORT_METHODS) == sorted(row.export for row in rows), (
        "weir/_runtime.py's EXPORT_METHODS has an entry per row's export"
    )
    for row in rows:
        assert getattr(weir, row.cls) in function.ROLES and row.cls in weir.__all__
        assert function.ROLES[getattr(weir, row.cls)] == row.export
        for method, _params in EXPORT_METHODS[row.export]:
            assert callable(getattr(Guest, method, None)), f"Guest.{method} ({row.export})"
