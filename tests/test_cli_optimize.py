"""`dice-lsp optimize` and `dice-lsp repair`: ranked rewrites and a diff, never an edit of the input file."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
SAXPY = (ROOT / "examples" / "saxpy.cu").read_text()
BROKEN = SAXPY.replace("y[i] = a * x[i] + y[i];", "y[i] = a * x[i] + y[i]")


def dice(*args: str) -> tuple[int, Any, str]:
    proc = subprocess.run([sys.executable, "-m", "dice_lsp.cli", *args, "--device", "cpu"], capture_output=True,
                          text=True, timeout=600, cwd=ROOT)
    return proc.returncode, json.loads(proc.stdout) if proc.stdout.startswith("{") else proc.stdout, proc.stderr


@pytest.fixture
def broken(tmp_path: Path) -> Path:
    path = tmp_path / "broken.cu"
    path.write_text(BROKEN)
    return path


def test_repair_prints_the_fix_and_leaves_the_file_alone(broken: Path, tmp_path: Path) -> None:
    code, report, _ = dice("repair", str(broken), "--json")
    assert code == 0 and report["compiles"] is True and report["rounds"] == 1 and report["errors"] == []
    assert "-    if (i < n) y[i] = a * x[i] + y[i]\n+    if (i < n) y[i] = a * x[i] + y[i];\n" in report["diff"]
    assert broken.read_text() == BROKEN
    fixed = tmp_path / "fixed.cu"
    code, diff, stderr = dice("repair", str(broken), "--out", str(fixed))
    assert code == 0 and fixed.read_text() == SAXPY and diff.startswith("--- a/broken.cu\n+++ b/broken.cu\n")
    assert "compiles after 1 round" in stderr and "1 rounds" not in stderr


def test_repair_that_fails_says_what_is_left_and_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "header.cu"
    path.write_text('#include "not_there.cuh"\n' + SAXPY)
    out = tmp_path / "out.cu"
    code, report, _ = dice("repair", str(path), "--json", "--out", str(out))
    assert code == 1 and report["compiles"] is False and report["rounds"] == 0 and report["diff"] == ""
    assert "not_there.cuh" in report["errors"][0]["message"] and not out.exists()


def test_the_input_file_is_never_the_output(broken: Path) -> None:
    for command in (["repair", str(broken)], ["optimize", str(broken), "--kernel", "saxpy"]):
        code, _, stderr = dice(*command, "--out", str(broken))
        assert code == 2 and stderr.count("\n") == 1 and "never edited in place" in stderr
    assert broken.read_text() == BROKEN


def test_an_unknown_kernel_is_one_line_naming_the_kernels_there_are(broken: Path) -> None:
    code, _, stderr = dice("optimize", str(ROOT / "examples" / "saxpy.cu"), "--kernel", "gemm")
    assert code == 2 and stderr.count("\n") == 1 and "saxpy, saxpy_vec4" in stderr
    code, _, stderr = dice("optimize", str(broken.parent / "missing.cu"), "--kernel", "saxpy")
    assert code == 2 and stderr.count("\n") == 1


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the answer of a machine without a GPU (unverified)")
def test_optimize_without_a_gpu_ranks_compiled_rewrites_unverified(tmp_path: Path) -> None:
    path = tmp_path / "saxpy.cu"
    path.write_text(SAXPY)
    out = tmp_path / "best.cu"
    code, report, _ = dice("optimize", str(path), "--kernel", "saxpy", "--candidates", "4", "--rounds", "1",
                           "--json", "--out", str(out))
    assert path.read_text() == SAXPY
    assert report["gpu"] is False and report["verified"] == 0 and report["kernel"] == "saxpy"
    ranked = report["candidates"]
    assert [c["rank"] for c in ranked] == list(range(1, len(ranked) + 1)) and report["generated"] >= len(ranked)
    # compiled first; a rewrite that does less work than the original (unverified here) after every other
    order = [(c["less_work"] is None, c["compiled"]) for c in ranked]
    assert order == sorted(order, reverse=True), ranked
    assert report["best"] is None or report["best"]["less_work"] is None
    assert all(c["diff"].startswith("--- a/saxpy.cu") for c in ranked)
    if report["best"] is None:
        assert code == 1 and not out.exists()
    else:
        assert code == 0 and "unverified" in report["summary"] and out.read_text() != SAXPY
        assert report["best"]["diff"] == ranked[0]["diff"]


def test_repair_and_optimize_take_check_s_include_folders_and_macros(tmp_path: Path) -> None:
    """`-I` and `-D` reach nvcc as they do for `check`: without them this file cannot compile."""
    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "scale.cuh").write_text("#pragma once\n#define TWICE(v) (SCALE * (v))\n")
    path = tmp_path / "uses.cu"
    path.write_text('#include "scale.cuh"\n__global__ void k(float* y) { y[0] = TWICE(y[0]); }\n')
    code, report, _ = dice("repair", str(path), "--json", "--rounds", "0")
    assert code == 1 and report["compiles"] is False
    code, report, _ = dice("repair", str(path), "--json", "--rounds", "0", "-I", str(tmp_path / "inc"), "-D", "SCALE=2")
    assert code == 0 and report["compiles"] is True and report["errors"] == []
    code, report, _ = dice("optimize", str(path), "--kernel", "k", "--json", "--rounds", "0", "--candidates", "1",
                           "-I", str(tmp_path / "inc"), "-D", "SCALE=2")
    assert report["kernel"] == "k" and report["candidates"] and all(
        "scale.cuh" not in (r["failure"] or "") and "SCALE" not in (r["failure"] or "") for r in report["candidates"])
