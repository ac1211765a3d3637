"""The build's pure parts: resolving the function, the world and the app."""

import textwrap

import pytest

from weir._build import BuildError, app, resolve, world


def project(tmp_path, source, config='[tool.weir]\nfunction = "fn:F"\n'):
    (tmp_path / "pyproject.toml").write_text(config)
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "fn.py").write_text(textwrap.dedent(source))
    return tmp_path


def test_exports_follow_the_roles(tmp_path):
    p = project(
        tmp_path,
        """
        from weir import KeyFunction, ProcessFunction, function

        @function
        class F(KeyFunction, ProcessFunction):
            def key(self, event): return b""
            def process(self, key, events, ctx): pass
        """,
    )
    root, module, cls, exports = resolve(p, None)
    assert (root, module, cls, exports) == (p / "src", "fn", "F", ["key-fn", "process-fn"])
    assert "import state;" in world(exports) and "export process-fn;" in world(exports)
    assert "import state;" not in world(["key-fn", "aggregate-fn"])
    shim = app(module, cls, exports)
    assert "class KeyFn(exports.KeyFn):" in shim and "class ProcessFn(exports.ProcessFn):" in shim
    compile(shim, "weir_app.py", "exec")


def test_clear_errors(tmp_path):
    p = project(tmp_path, "class F: pass\n", config='[tool.weir]\nfunction = "fn:G"\n')
    with pytest.raises(BuildError, match="class 'G' not found"):
        resolve(p, None)
    with pytest.raises(BuildError, match="implements no role"):
        resolve(p, "fn:F")
    with pytest.raises(BuildError, match="module 'nope' not found"):
        resolve(p, "nope:F")
