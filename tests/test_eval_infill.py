"""`dice-lsp eval infill`: how a suite hole becomes the editor's request, and the command end to end."""

from __future__ import annotations

import json
import subprocess
import sys

from dice_lsp.cuda import holes as editor
from dice_lsp.evals.suite import SuiteHole
from dice_lsp.evals.systems import IDIOM, LINES_TOKENS, document_for, empty, idiom, region_for

KERNEL = """#include <cuda_runtime.h>

__device__ float twice(float x) {
    return 2.0f * x;
}

__global__ void scale(float* out, const float* in, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        out[i] = twice(in[i]);
    }
}
"""


def hole(kind: str, truth: str, function: str = "scale", occurrence: int = 0) -> SuiteHole:
    start = -1
    for _ in range(occurrence + 1):
        start = KERNEL.index(truth, start + 1)
    return SuiteHole(f"{kind}/0", kind, "f", start, start + len(truth), function, False)  # type: ignore[arg-type]


def test_the_document_never_holds_the_truth() -> None:
    line = hole("line", "int i = blockIdx.x * blockDim.x + threadIdx.x;")
    document = document_for(KERNEL, line)
    assert "int i =" not in document
    assert document == KERNEL.replace("int i = blockIdx.x * blockDim.x + threadIdx.x;", "")


def test_an_emptied_line_is_asked_with_the_editors_own_rule() -> None:
    line = hole("line", "int i = blockIdx.x * blockDim.x + threadIdx.x;")
    region = region_for(document_for(KERNEL, line), line)
    assert region is not None and region.kind == "line"
    assert region.start == line.start and region.canvas_tokens == editor.EMPTY_LINE_TOKENS
    assert region.indent == "    "


def test_a_half_typed_line_is_asked_at_its_end() -> None:
    truth = "blockDim.x + threadIdx.x;"
    midline = hole("midline", truth)
    document = document_for(KERNEL, midline)
    assert "int i = blockIdx.x * \n" in document
    region = region_for(document, midline)
    assert region is not None and region.kind == "line" and region.start == midline.start
    assert region.canvas_tokens == editor.LINE_TOKENS


def test_multi_line_and_body_holes_get_a_fixed_canvas_that_does_not_reveal_their_length() -> None:
    lines = hole("lines", "if (i < n) {\n        out[i] = twice(in[i]);\n    }")
    region = region_for(document_for(KERNEL, lines), lines)
    assert region is not None and (region.start, region.end) == (lines.start, lines.start)
    assert region.canvas_tokens == LINES_TOKENS
    kernel_body = KERNEL[KERNEL.index("{\n    int i") + 1:KERNEL.rindex("}")]
    body = hole("body", kernel_body)
    region = region_for(document_for(KERNEL, body), body)
    assert region is not None and region.canvas_tokens == editor.KERNEL_BODY_TOKENS
    device_body = hole("body", "\n    return 2.0f * x;\n", "twice")
    region = region_for(document_for(KERNEL, device_body), device_body)
    assert region is not None and region.canvas_tokens == editor.BODY_TOKENS


def test_baselines_show_nothing_or_the_idiom() -> None:
    line = hole("line", "int i = blockIdx.x * blockDim.x + threadIdx.x;")
    assert empty().answer(KERNEL, line).fill is None
    assert idiom().answer(KERNEL, line).fill == IDIOM


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dice_lsp.cli", "eval", "infill", *args],
                          capture_output=True, text=True, timeout=600)


def test_bad_kind_and_execute_without_gpu_are_one_line_errors() -> None:
    proc = run_cli("--kinds", "line,statement", "--system", "empty")
    assert proc.returncode == 2 and "unknown hole kind: statement;" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    import torch

    if not torch.cuda.is_available():
        proc = run_cli("--execute", "--system", "empty", "--limit", "1")
        assert proc.returncode == 3 and proc.stderr.count("\n") == 1 and "GPU" in proc.stderr


def test_smoke_one_line_holes_with_the_embedded_model() -> None:
    """The CI smoke run: 100 one-line holes of the test split through the editor path on the CPU."""
    proc = run_cli("--kinds", "line", "--limit", "100", "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["holes"] == 100 and len(report["fills"]) == 100
    row = report["kinds"]["line"]
    assert row["holes"] == 100
    assert 0 <= row["show_rate"]["low"] <= row["show_rate"]["mean"] <= row["show_rate"]["high"] <= 1
    shown = [f for f in report["fills"] if f["fill"]]
    assert all(f["shown"] for f in shown) and all(not f["shown"] for f in report["fills"] if not f["fill"])
    assert all(f["latency_ms"] > 0 for f in report["fills"])
