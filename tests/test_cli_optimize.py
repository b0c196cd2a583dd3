"""`dice-lsp optimize` and `dice-lsp repair`: ranked rewrites and a diff, never an edit of the input file."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pytest
import torch

from .cli_runs import cli_runs

ROOT = Path(__file__).resolve().parents[1]
SAXPY = (ROOT / "examples" / "saxpy.cu").read_text()
BROKEN = SAXPY.replace("y[i] = a * x[i] + y[i];", "y[i] = a * x[i] + y[i]")


def dice(*args: str) -> tuple[int, Any, str]:
    [result] = dice_all(list(args))
    return result


def dice_all(*commands: list[str]) -> list[tuple[int, Any, str]]:
    """`dice` of each command, all started at once."""
    return [(proc.returncode, json.loads(proc.stdout) if proc.stdout.startswith("{") else proc.stdout, proc.stderr)
            for proc in cli_runs(*([*command, "--device", "cpu"] for command in commands), timeout=600, cwd=ROOT)]


@pytest.fixture
def broken(tmp_path: Path) -> Path:
    path = tmp_path / "broken.cu"
    path.write_text(BROKEN)
    return path


def test_repair_prints_the_fix_and_leaves_the_file_alone(broken: Path, tmp_path: Path) -> None:
    """By default the repair is a diff to read (or, with --json, the proposed text and the diff): no file is
    written; only `--out` writes one, and never over FILE."""
    fixed = tmp_path / "fixed.cu"
    (code, report, _), (shown, printed, told), (written, diff, stderr) = dice_all(
        ["repair", str(broken), "--json"], ["repair", str(broken)], ["repair", str(broken), "--out", str(fixed)])
    assert code == 0 and report["compiles"] is True and report["rounds"] == 1 and report["errors"] == []
    assert report["text"] == SAXPY
    hunk = "-    if (i < n) y[i] = a * x[i] + y[i]\n+    if (i < n) y[i] = a * x[i] + y[i];\n"
    assert report["diff"].startswith("--- a/broken.cu\n+++ b/broken.cu\n") and hunk in report["diff"]
    assert shown == 0 and printed == report["diff"] and "compiles after 1 round" in told
    assert written == 0 and fixed.read_text() == SAXPY and diff == report["diff"]
    assert "compiles after 1 round" in stderr and "1 rounds" not in stderr
    assert broken.read_text() == BROKEN and sorted(tmp_path.iterdir()) == [broken, fixed]


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


def test_repair_of_what_is_not_a_source_file_is_one_line(broken: Path) -> None:
    binary = broken.with_name("binary.cu")
    binary.write_bytes(b"\xff\xfe\x00")
    wrong = {broken.with_name("missing.cu"): "no such file", broken.parent: "is a directory",
             binary: "not UTF-8 text"}
    for (path, why), (code, stdout, stderr) in zip(wrong.items(), dice_all(*(["repair", str(p)] for p in wrong)),
                                                   strict=True):
        assert (code, stdout) == (2, "") and stderr.startswith(f"dice-lsp: error: {path}: {why}")
        assert stderr.count("\n") == 1



def test_an_unknown_kernel_is_one_line_naming_the_kernels_there_are(broken: Path) -> None:
    code, _, stderr = dice("optimize", str(ROOT / "examples" / "saxpy.cu"), "--kernel", "gemm")
    assert code == 2 and stderr.count("\n") == 1 and "saxpy, saxpy_vec4" in stderr
    code, _, stderr = dice("optimize", str(broken.parent / "missing.cu"), "--kernel", "saxpy")
    assert code == 2 and stderr.count("\n") == 1


# What the fake model (tests/fake_model.py) writes for optimize's four calls with dice-tiny, in call order:
# re-noise 30%, 60% and 100% of the body, then the body from the signature (which gets a newline in front).
GRID_STRIDE = ("\n    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)"
               " y[i] = a * x[i] + y[i];\n")
UNDECLARED = "\n    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < n) y[i] = a * x[i] + z[i];\n"
RETURNS = "\n    return;\n"
FMAF_LINE = "    if (i < n) y[i] = fmaf(a, x[i], y[i]);\n"
FMAF = "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n" + FMAF_LINE


def fake_dice(folder: Path, fills: list[str], *args: str) -> tuple[int, Any, str]:
    """`dice` with a model that writes `fills` (tests/fake_model.py); the rest is the product's own. In this
    process (`cli.main`, the fake's patches undone after it): a plumbing test of what comes after the model; the
    `dice-lsp` process around it, with the real model, is what `dice` runs in the tests here and in
    test_cli_complete.py."""
    from dice_lsp import cli

    from .fake_model import install

    (folder / "fills.json").write_text(json.dumps(fills))
    out, err = io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        install(folder, patch.setattr)
        patch.chdir(ROOT)
        code = cli.main([*args, "--device", "cpu"])
    stdout = out.getvalue()
    return code, json.loads(stdout) if stdout.startswith("{") else stdout, err.getvalue()


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the answer of a machine without a GPU (unverified)")
def test_optimize_without_a_gpu_ranks_rewrites_and_offers_none_unverified(tmp_path: Path) -> None:
    """Four rewrites, each with its own fate: two compile (ranked by nvcc's register count), one does not, one
    does no work (last: never offered unverified). Without a GPU none can be verified, so none is offered: no
    best, nothing written to --out, exit 1; the top-ranked one is a draft to read (its diff), the input untouched."""
    path = tmp_path / "saxpy.cu"
    path.write_text(SAXPY)
    out = tmp_path / "best.cu"
    code, report, _ = fake_dice(tmp_path, [GRID_STRIDE, UNDECLARED, RETURNS, FMAF], "optimize", str(path),
                                "--kernel", "saxpy", "--candidates", "4", "--rounds", "0", "--json", "--out", str(out))
    assert path.read_text() == SAXPY
    assert (code, report["gpu"], report["unverified"], report["kernel"]) == (1, False, "no GPU", "saxpy")
    assert (report["generated"], report["compiled"], report["verified"], report["faster"]) == (4, 3, 0, 0)
    ranked = report["candidates"]
    assert [(c["rank"], c["origin"], c["compiled"], c["verified"], c["failure"], c["less_work"]) for c in ranked] == [
        (1, "signature", True, False, None, None),
        (2, "re-noise 30%", True, False, None, None),
        (3, "re-noise 60%", False, False, 'does not compile: identifier "z" is undefined', None),
        (4, "re-noise 100%", True, False, None, "does nothing (returns before any work)")]
    assert ranked[0]["resources"]["registers"] < ranked[1]["resources"]["registers"]
    assert all(c["diff"].startswith("--- a/saxpy.cu\n+++ b/saxpy.cu\n") for c in ranked)
    assert "-    if (i < n) y[i] = a * x[i] + y[i];\n+" + FMAF_LINE in ranked[0]["diff"]
    assert (report["best"], report["text"], report["draft"], out.exists()) == (None, None, ranked[0], False)
    assert report["summary"] == (
        "saxpy: nothing to apply: no rewrite could be verified (a GPU verifies and times them: this machine's, or "
        "a team server's, dice.server.url); the top-ranked draft (signature, "
        f"{ranked[0]['resources']['registers']} registers, 0 spill bytes, 0 B stack) is shown as a diff only; "
        "4 distinct candidates of 4, 3 compiled, none verified (no GPU), 1 doing less work than the original "
        "(never offered unverified)")
    code, stdout, _ = fake_dice(tmp_path, [GRID_STRIDE, UNDECLARED, RETURNS, FMAF], "optimize", str(path),
                                "--kernel", "saxpy", "--candidates", "4", "--rounds", "0")
    assert code == 1 and "draft (unverified, not applied):\n--- a/saxpy.cu\n" in stdout


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the answer of a machine without a GPU (unverified)")
def test_optimize_with_nothing_that_compiles_offers_nothing_and_says_why(tmp_path: Path) -> None:
    """When no rewrite is worth offering, the answer is exactly that: exit 1, no best, no --out file, and the
    summary says what became of each (the fake model's two texts, each written twice, make two candidates)."""
    path = tmp_path / "saxpy.cu"
    path.write_text(SAXPY)
    out = tmp_path / "best.cu"
    code, report, _ = fake_dice(tmp_path, [UNDECLARED, RETURNS], "optimize", str(path), "--kernel", "saxpy",
                                "--candidates", "4", "--rounds", "0", "--json", "--out", str(out))
    assert (code, report["best"], report["text"], out.exists()) == (1, None, None, False)
    assert [(c["origin"], c["compiled"], c["failure"], c["less_work"]) for c in report["candidates"]] == [
        ("re-noise 30%", False, 'does not compile: identifier "z" is undefined', None),
        ("re-noise 60%", True, None, "does nothing (returns before any work)")]
    assert report["summary"] == (
        "saxpy: no faster rewrite found (2 distinct candidates of 4, 1 compiled, none verified (no GPU), "
        "1 doing less work than the original (never offered unverified))")
    assert path.read_text() == SAXPY


@pytest.mark.slow
def test_repair_and_optimize_take_check_s_include_folders_and_macros(tmp_path: Path) -> None:
    """`-I` and `-D` reach nvcc as they do for `check`: without them this file cannot compile."""
    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "scale.cuh").write_text("#pragma once\n#define TWICE(v) (SCALE * (v))\n")
    path = tmp_path / "uses.cu"
    path.write_text('#include "scale.cuh"\n__global__ void k(float* y) { y[0] = TWICE(y[0]); }\n')
    flags = ["-I", str(tmp_path / "inc"), "-D", "SCALE=2"]
    bare, repaired, (_, report, _) = dice_all(
        ["repair", str(path), "--json", "--rounds", "0"], ["repair", str(path), "--json", "--rounds", "0", *flags],
        ["optimize", str(path), "--kernel", "k", "--json", "--rounds", "0", "--candidates", "1", *flags])
    assert bare[0] == 1 and bare[1]["compiles"] is False
    assert repaired[0] == 0 and repaired[1]["compiles"] is True and repaired[1]["errors"] == []
    assert report["kernel"] == "k" and report["candidates"] and all(
        "scale.cuh" not in (r["failure"] or "") and "SCALE" not in (r["failure"] or "") for r in report["candidates"])
