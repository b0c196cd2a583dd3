"""The CUDA-Infill library builder: which holes the cutter cuts, splits, and the corpus screens."""

from __future__ import annotations

import random

from dice_lsp.evals import suite
from dice_lsp.training import suite_build as build

KERNELS = """#include <cuda_runtime.h>
#define SCALE 2.0f

/* a block comment
   int fake = 1;
*/
template <typename T>
__device__ T twice(T x) {
    T y = x * SCALE;
    return y + y;
}

__global__ void kern(float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    // int commented = 0;
    if (i >= n) return;
#if 0
    out[i] = -1.0f;
#else
    out[i] = twice(out[i]);
#endif
    const char* s = "a // b { c";
    /* inline block */ int j = i + 1;
    out[j % n] += 1.0f;
}

void host_only(int n) {
    int k = n + 1;
    int m = k * 2;
}

__global__ void broken(int* p) {
    int q = p[0] +;
    p[1] = q;
}
"""

BLOCKS = """__global__ void blocks(float* x, int n) {
    for (int i = 0; i < n; ++i) {
        x[i] = 0.0f;
    }
    if (n > 2) { x[0] = 1.0f; }
    x[1] = 2.0f;
}
"""


def _truths(text: str, kind: str) -> list[str]:
    return [text[start:end] for k, start, end, _, _ in build.cut_holes(text, random.Random(0)) if k == kind]


def test_line_holes_skip_comments_inactive_code_preprocessor_and_host_functions() -> None:
    assert _truths(KERNELS, "line") == [
        "T y = x * SCALE;", "return y + y;",
        "int i = blockIdx.x * blockDim.x + threadIdx.x;", "if (i >= n) return;", "out[i] = twice(out[i]);",
        'const char* s = "a // b { c";', "out[j % n] += 1.0f;",
    ]


def test_functions_and_template_flags() -> None:
    found = {(kind, name, template) for kind, _, _, name, template in build.cut_holes(KERNELS, random.Random(0))}
    assert {(name, template) for _, name, template in found} == {("twice", True), ("kern", False)}


def test_lines_need_statement_ends_code_between_and_balanced_braces() -> None:
    assert _truths(KERNELS, "lines") == ["T y = x * SCALE;\n    return y + y;"]
    loop = "for (int i = 0; i < n; ++i) {\n        x[i] = 0.0f;\n    }\n    if (n > 2) { x[0] = 1.0f; }"
    assert _truths(BLOCKS, "lines") == [  # the loop's head without its "}" is not balanced: never a span
        loop, loop + "\n    x[1] = 2.0f;", "if (n > 2) { x[0] = 1.0f; }\n    x[1] = 2.0f;"]


def test_body_spans_the_braces_exclusive() -> None:
    holes = [(start, end) for kind, start, end, _, _ in build.cut_holes(KERNELS, random.Random(0)) if kind == "body"]
    assert [(KERNELS[start - 1], KERNELS[end]) for start, end in holes] == [("{", "}"), ("{", "}")]
    assert KERNELS[holes[0][0]:holes[0][1]] == "\n    T y = x * SCALE;\n    return y + y;\n"


def test_midline_cuts_are_token_boundaries() -> None:
    line = "out[i] = twice(out[i]);"
    assert [line[at:] for at in build.midline_cuts(line)] == [
        "i] = twice(out[i]);", "] = twice(out[i]);", "= twice(out[i]);", "twice(out[i]);", "(out[i]);",
        "out[i]);", "[i]);", "i]);", "]);",
    ]
    call = 's = f("a b", x->y);'
    assert [call[at:] for at in build.midline_cuts(call)] == [  # never inside the literal
        'f("a b", x->y);', '("a b", x->y);', '"a b", x->y);', ', x->y);', 'x->y);', '->y);', 'y);']


def test_midline_holes_end_each_statement_line() -> None:
    lines = dict.fromkeys(_truths(KERNELS, "line"))
    for start, end in ((s, e) for k, s, e, _, _ in build.cut_holes(KERNELS, random.Random(3)) if k == "midline"):
        owner = KERNELS[KERNELS.rfind("\n", 0, start) + 1:end].strip()
        assert owner in lines
        assert KERNELS[start:end] in [owner[at:] for at in build.midline_cuts(owner)]


def test_split_of_is_fixed_by_source_and_path() -> None:
    assert [suite.split_of("gloo", f"gloo/cuda_{i}.cu") for i in range(8)] == [
        "test", "test", "test", "test", "test", "dev", "test", "dev"]


def _numbered(prefix: str, lines: int) -> str:
    return "\n".join(f"    float {prefix}{i} = load(x, {i}) * {i + 3}.0f;" for i in range(lines))


def test_near_copies_of_the_corpus_and_of_the_suite_are_dropped() -> None:
    original = f"__global__ void k(float* x) {{\n{_numbered('a', 60)}\n}}\n"
    index = build.CorpusIndex.from_texts([original])
    near_copy = original.replace("a59 = load(x, 59)", "a59 = load(x, 58)")
    fresh = f"__global__ void g(float* y) {{\n{_numbered('b', 60)}\n}}\n"
    files = [build.SuiteCandidate("s", "near.cu", near_copy, "MIT"),
             build.SuiteCandidate("s", "fresh.cu", fresh, "MIT"),
             build.SuiteCandidate("s", "again.cu", fresh.replace("    ", "  "), "MIT"),
             build.SuiteCandidate("s", "close.cu", fresh.replace("b59 = load(x, 59)", "b59 = load(y, 59)"), "MIT")]
    kept, reasons = build.screen(files, index)
    assert [c.path for c in kept] == ["fresh.cu"]
    assert reasons == [("s", "corpus-near"), ("s", "suite-exact"), ("s", "suite-near")]


def test_functions_mostly_made_of_corpus_lines_host_no_holes() -> None:
    body = _numbered("c", 12)
    index = build.CorpusIndex.from_texts([f"void elsewhere() {{\n{body}\n}}\n"])
    text = (f"__global__ void copied(float* x) {{\n{body}\n}}\n\n"
            f"__global__ void mine(float* x) {{\n{_numbered('d', 4)}\n}}\n")
    stats = build.SuiteSourceStats()
    holes = build.file_holes(build.SuiteCandidate("s", "f.cu", text, "MIT"), index, stats)
    assert (stats.copied_functions, stats.hosts) == (1, 1)
    assert {h.function for rows in holes.values() for h in rows} == {"mine"}
    assert [len(holes[kind]) for kind in suite.KINDS] == [3, 3, 3, 1]
