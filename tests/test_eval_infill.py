"""`dice-lsp eval infill`: holes cut from real kernels, scored against the real nvcc."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from dice_lsp.training.evaluate import holes_in, normalise

KERNEL = """#include <cuda_runtime.h>

__device__ float twice(float x) { return 2.0f * x; }

__global__ void scale(float* out, const float* in, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    // bounds check
    if (i < n) {
        out[i] = twice(in[i]);
    }
}
"""


def test_holes_are_statement_lines_runs_and_kernel_bodies() -> None:
    holes = holes_in(KERNEL, 0)
    texts = {kind: [KERNEL[h.start:h.end] for h in found] for kind, found in holes.items()}
    assert texts["line"] == ["int i = blockIdx.x * blockDim.x + threadIdx.x;", "if (i < n) {",
                             "out[i] = twice(in[i]);"]
    assert all(t.count("\n") >= 1 for t in texts["lines"])
    assert texts["body"] == [KERNEL[KERNEL.index("{\n    int") + 1:KERNEL.rindex("}")]], "only __global__ bodies"
    assert "// bounds check" not in texts["line"]


def test_holes_in_templates_are_not_compile_checked() -> None:
    text = KERNEL + "\ntemplate <typename T>\n__global__ void copy(T* out, const T* in) {\n    out[0] = in[0];\n}\n"
    holes = holes_in(text, 0)["line"]
    checkable = {text[h.start:h.end]: h.checkable for h in holes}
    assert checkable["out[i] = twice(in[i]);"] and not checkable["out[0] = in[0];"]


def test_normalise_ignores_whitespace_only() -> None:
    assert normalise("  a  =\tb;\n") == normalise("a = b;") != normalise("a=b;")


def test_eval_cli_reports_every_hole_kind(tmp_path: Path, native_dir: Path) -> None:
    heldout = tmp_path / "heldout.jsonl"
    heldout.write_text(json.dumps({"source": "test", "path": "scale.cu", "license": "MIT", "text": KERNEL}) + "\n")
    proc = subprocess.run([sys.executable, "-m", "dice_lsp.cli", "eval", "infill", "--heldout", str(heldout),
                           "--holes", "2", "--model", str(native_dir), "--json"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["files"] == 1 and report["files_compiling_as_is"] == 1, "the kernel compiles with nvcc"
    assert set(report["kinds"]) == {"line", "lines", "body"}
    line = report["kinds"]["line"]
    assert line["holes"] == 2 and 0.0 <= line["edit_similarity"] <= 1.0
    non_empty = round(line["holes"] * (1 - line["empty"]))
    assert line["compile_checked"] == non_empty, "a compile is counted for non-empty fills only"


def test_eval_cli_refuses_a_missing_heldout_file(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "dice_lsp.cli", "eval", "infill", "--heldout",
                           str(tmp_path / "nope.jsonl")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "no such held-out file" in proc.stderr
