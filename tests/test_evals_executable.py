"""The executable part's CPU side: launch specs from signatures, standalone extraction, the hole cutter."""

from __future__ import annotations

import json
import random
from pathlib import Path

from dice_lsp.harness.spec import parse_spec
from dice_lsp.training import suite_executable as ex

SAXPY = "float* y, const float* __restrict__ x, float a, int n"


def test_flat_spec_for_saxpy_is_exact() -> None:
    params = ex.parse_params(SAXPY)
    assert params is not None
    body = "__global__ void saxpy(float* y, const float* x, float a, int n) { int i = blockIdx.x * blockDim.x; }"
    assert ex.candidate_specs("saxpy", params, body)[0] == """kernel = "saxpy"
sizes = { n = 65536 }
check_sizes = [{ n = 1000 }, { n = 4097 }]
grid = ["cdiv(n, 256)"]
block = [256]
args = [
  { name = "y", role = "inout", dtype = "float32", shape = ["n"] },
  { name = "x", role = "in", dtype = "float32", shape = ["n"] },
  { name = "a", role = "scalar", dtype = "float32", value = "0.5" },
  { name = "n", role = "scalar", dtype = "int32", value = "n" },
]
"""


def test_two_dimensional_kernel_gets_the_2d_grid_first_with_rows_and_cols() -> None:
    assert ex.parse_params("__half* out, Unknown k") is None  # a type the harness does not know
    params = ex.parse_params("__half* out, const int64_t* in, int rows, int width")
    assert params is not None
    specs = ex.candidate_specs("t", params, "{ extern __shared__ float s[]; int r = blockIdx.y; }")
    assert specs[0] == """kernel = "t"
sizes = { rows = 256, cols = 256 }
check_sizes = [{ rows = 37, cols = 100 }, { rows = 65, cols = 33 }]
grid = ["cdiv(cols, 16)", "cdiv(rows, 16)"]
block = [16, 16]
shared_bytes = 8192
args = [
  { name = "out", role = "inout", dtype = "float16", shape = ["rows*cols"] },
  { name = "in", role = "in", dtype = "int64", shape = ["rows*cols"] },
  { name = "rows", role = "scalar", dtype = "int32", value = "rows" },
  { name = "width", role = "scalar", dtype = "int32", value = "cols" },
]
"""
    assert [parse_spec(s).grid for s in specs] == [("cdiv(cols, 16)", "cdiv(rows, 16)"), ("cdiv(rows*cols, 256)",),
                                                   ("cdiv(n, 256)",), ("rows",)]


def test_parameters_the_harness_cannot_pass_are_refused() -> None:
    assert ex.parse_params("float** p") is None
    assert ex.parse_params("const Foo& f, float* y") is None
    assert ex.parse_params("float x[4]") is None
    assert ex.parse_params("void") == []


SOURCE = """#include "project/helpers.h"
#define SQUARE(x) ((x) * (x))
const float kScale = 2.0f;
struct Pair { float a, b; };

__device__ float twice(float v) { return SQUARE(v) * kScale; }

__global__ void uses_helper(float* y, const float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = twice(x[i]);
}

__global__ void uses_struct(float* y, int n) {
  Pair p{1.0f, 2.0f};
  if (threadIdx.x < n) y[threadIdx.x] = p.a;
}

__global__ void uses_header(float* y, int n) {
  if (threadIdx.x < n) y[threadIdx.x] = project_helper(y[threadIdx.x]);
}

template <typename T>
__global__ void scale(T* y, T a, int n) {
  int i = threadIdx.x;
  if (i < n) y[i] *= a;
}
"""


def _start_of(name: str) -> int:
    from dice_lsp.cuda.functions import parse_functions
    return next(f.start for f in parse_functions(SOURCE) if f.name == name)


def test_extractor_copies_the_device_helper_macro_and_constant() -> None:
    made = ex.standalone(SOURCE, _start_of("uses_helper"), ex.file_tables(SOURCE), "src:a.cu:uses_helper", "MIT")
    assert isinstance(made, ex.Standalone)
    assert made.text == """// Kernel `uses_helper` of src:a.cu, made standalone for CUDA-Infill.
// License: MIT (the source's).
// SPDX-License-Identifier: MIT

#include <cuda_runtime.h>

#define SQUARE(x) ((x) * (x))

const float kScale = 2.0f;

__device__ float twice(float v) { return SQUARE(v) * kScale; }

__global__ void uses_helper(float* y, const float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = twice(x[i]);
}
"""
    assert [p.name for p in made.params] == ["y", "x", "n"]


def test_extractor_refuses_a_class_and_a_project_header() -> None:
    tables = ex.file_tables(SOURCE)
    assert ex.standalone(SOURCE, _start_of("uses_struct"), tables, "o", "MIT") == "uses a type of the file: Pair"
    assert ex.standalone(SOURCE, _start_of("uses_header"), tables, "o", "MIT") == \
        "calls a function that is not in the file: project_helper"


def test_one_type_template_is_instantiated_as_float() -> None:
    made = ex.standalone(SOURCE, _start_of("scale"), ex.file_tables(SOURCE), "src:a.cu:scale", "MIT")
    assert isinstance(made, ex.Standalone)
    assert "__global__ void scale(float* y, float a, int n) {" in made.text
    assert "template" not in made.text
    assert [(p.dtype, p.pointer) for p in made.params] == [("float32", True), ("float32", False), ("int32", False)]


KERNEL = """#include <cuda_runtime.h>
__global__ void k(float* y, const float* x, int n) {
  // a comment line
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float v = x[i] * 2.0f;
    y[i] = v + 1.0f;
  }
}
"""


def test_cutter_spans() -> None:
    holes = ex._cut_holes(KERNEL, random.Random(3))
    texts = {(kind, KERNEL[start:end]) for kind, start, end, function, template in holes}
    assert all(function == "k" and not template for *_, function, template in holes)
    statement_lines = {"int i = blockIdx.x * blockDim.x + threadIdx.x;", "if (i < n) {", "float v = x[i] * 2.0f;",
                       "y[i] = v + 1.0f;"}
    assert kind_counts(holes) == {"line": 2, "midline": 2, "lines": 1, "body": 1}
    for kind, text in texts:
        if kind == "line":
            assert text in statement_lines
        elif kind == "midline":
            assert any(line.endswith(text) and len(line) - len(text) >= 4 for line in statement_lines)
            assert len(text.replace(" ", "")) >= 3
        elif kind == "lines":
            assert text == "float v = x[i] * 2.0f;\n    y[i] = v + 1.0f;"  # the only balanced run of 2-5 lines
        else:
            assert text == KERNEL[KERNEL.index("{", KERNEL.index("void k")) + 1:KERNEL.rindex("}")]


def kind_counts(holes: list[ex.ExecutableHole]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for kind, *_ in holes:
        counts[kind] = counts.get(kind, 0) + 1
    return counts


def test_statement_lines_skip_comments_and_lone_braces() -> None:
    open_ = KERNEL.index("{", KERNEL.index("void k"))
    lines = ex._statement_lines(KERNEL, open_, KERNEL.rindex("}"))
    assert [KERNEL[a:b] for a, b in lines] == ["int i = blockIdx.x * blockDim.x + threadIdx.x;", "if (i < n) {",
                                              "float v = x[i] * 2.0f;", "y[i] = v + 1.0f;"]


def test_template_parameters_are_replaced_as_whole_words() -> None:
    assert ex._instantiate("template <typename T, int kThreadsPerBlock, bool kExact, int kUnroll>",
                           "void f(T* Tx, T v) { kThreadsPerBlock; kExact; kUnroll; }") == \
        "void f(float* Tx, float v) { 256; true; 4; }"
    assert ex._instantiate("template <>", "void f() {}") is None
    assert ex._instantiate("template <Activation A>", "void f() {}") is None


def test_only_holes_whose_deletion_breaks_the_kernel_are_kept() -> None:
    candidate = ex.StandaloneKernel("s:p:k", "s", "p", "MIT", "test", "k", "_Z1k", KERNEL, [],
                             [["line", 1, 2], ["lines", 3, 4], ["body", 5, 6]])
    verdict = ex.Verdict(0, [""], {"0": "passes", "1": "does not compile", "2": "fails: out of bounds"})
    assert ex.kept_holes(candidate, verdict) == [("lines", 3, 4), ("body", 5, 6)]


def test_the_verdicts_file_keeps_its_layout_and_reads_back(tmp_path: Path) -> None:
    verdicts = {"s:p:k": ex.Verdict(1, ["bad grid", ""], {"0": "passes", "1": "fails: x"}),
                "s:p:j": ex.Verdict(None, ["not built"])}
    path = tmp_path / "verdicts.json"
    ex.write_verdicts(path, verdicts)
    assert json.loads(path.read_text()) == {
        "s:p:k": {"spec": 1, "spec_errors": ["bad grid", ""], "holes": {"0": "passes", "1": "fails: x"}},
        "s:p:j": {"spec": None, "spec_errors": ["not built"], "holes": {}}}
    assert path.read_text().startswith('{\n "s:p:j": {\n  "holes": {},')  # indent 1, keys sorted, as before
    assert ex.read_verdicts(path) == verdicts
    path.write_text(json.dumps({"s:p:k": {"spec": 0, "holes": {"0": "passes"}}}))  # a file from before spec_errors
    assert ex.read_verdicts(path) == {"s:p:k": ex.Verdict(0, [], {"0": "passes"})}
