"""The Python examples against their Rust twins through the real `weir`
binary: outputs (and late outputs) byte-identical.

Skipped unless ``WEIR_BIN`` names a ``weir`` binary and the components are
built: ``target/functions/<name>.wasm`` (Rust twins: ``WEIR_RUST_FUNCTIONS``,
default the same directory), e.g.::

    WEIR_BIN=target/release/weir python3 -m pytest guest-sdk/python -k twins
"""

import os
import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
FUNCTIONS = REPO / "functions"
PY_WASM = REPO / "target" / "functions"
RUST_WASM = Path(os.environ.get("WEIR_RUST_FUNCTIONS", PY_WASM))
WEIR = os.environ.get("WEIR_BIN")


def run(spec_dir: Path, spec_text: str, tmp_path: Path, name: str) -> bytes:
    spec = spec_dir / f".{name}.twin.yaml"
    spec.write_text(spec_text)
    try:
        done = subprocess.run(
            [WEIR, "run", str(spec), "--fresh", "--data-dir", str(tmp_path / name), "-q"],
            capture_output=True,
            timeout=600,
        )
    finally:
        spec.unlink()
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout


@pytest.mark.parametrize("example", ["revenue", "windowed-revenue"])
def test_output_is_byte_identical_to_the_rust_twin(example, tmp_path):
    twin = f"{example}-py"
    wasm = {example: RUST_WASM / f"{example}.wasm", twin: PY_WASM / f"{twin}.wasm"}
    if not WEIR or not all(w.is_file() for w in wasm.values()):
        pytest.skip("set WEIR_BIN and build target/functions/{example,example-py}.wasm")
    outputs = []
    for name in (example, twin):
        spec = (FUNCTIONS / name / "pipeline.yaml").read_text()
        spec = re.sub(r"wasm: \S+", f"wasm: {wasm[name]}", spec)
        outputs.append(run(FUNCTIONS / name, spec, tmp_path, name))
    assert outputs[0] and outputs[0] == outputs[1]
