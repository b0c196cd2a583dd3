"""`dice-lsp bench` on a machine without a GPU: the build still runs and says why nothing was timed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(torch.cuda.is_available(), reason="the no-GPU answers; the GPU ones are gpu tests")


def bench(*args: str) -> tuple[int, dict[str, Any], str]:
    proc = subprocess.run([sys.executable, "-m", "dice_lsp.cli", "bench", *args], capture_output=True, text=True,
                          timeout=300, cwd=ROOT)
    return proc.returncode, json.loads(proc.stdout) if proc.stdout.startswith("{") else {}, proc.stderr


def test_without_a_gpu_it_compiles_and_exits_3_with_a_reason() -> None:
    code, report, _ = bench("examples/saxpy.cu", "--json")
    assert code == 3 and report["gpu"] is False and report["compile"] == {"ok": True, "diagnostics": []}
    assert report["kernels"] == [] and "no CUDA GPU" in report["reason"]
    code, _, stderr = bench("examples/saxpy.cu")
    assert code == 3 and stderr.strip() == "dice-lsp: no CUDA GPU here: compiled only, nothing verified or timed"


def test_a_compile_error_is_reported_with_its_line(tmp_path: Path) -> None:
    source = (ROOT / "examples" / "saxpy.cu").read_text().replace("y[i] = a * x[i] + y[i];", "y[i] = a * q;")
    path = tmp_path / "broken.cu"
    path.write_text(source)
    code, report, _ = bench(str(path), "--json")
    assert code == 3 and report["compile"]["ok"] is False
    [error] = report["compile"]["diagnostics"]
    assert '"q"' in error["message"] and error["range"]["start"]["line"] == source.splitlines().index(
        "    if (i < n) y[i] = a * q;")


@pytest.mark.parametrize(("args", "message"), [
    (["no/such.cu"], "no/such.cu"),
    (["examples/vector_add.cu"], "no launch spec"),
    (["examples/saxpy.cu", "--ref", "missing.py"], "reference missing.py not found"),
    (["examples/saxpy.cu", "--timeout", "nan"], "--timeout: must be a number of seconds between 0 and 86400"),
    (["examples/saxpy.cu", "--timeout", "inf"], "--timeout: must be a number of seconds between 0 and 86400"),
])
def test_bad_input_is_one_line_and_exit_2(args: list[str], message: str) -> None:
    code, _, stderr = bench(*args)
    assert code == 2 and len(stderr.strip().splitlines()) == 1 and message in stderr


def test_a_broken_launch_spec_is_bad_input(tmp_path: Path) -> None:
    path = tmp_path / "k.cu"
    path.write_text((ROOT / "examples" / "saxpy.cu").read_text().replace('role = "in"', 'role = "input"', 1))
    code, _, stderr = bench(str(path))
    assert code == 2 and "role must be one of" in stderr
