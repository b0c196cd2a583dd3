"""Golden cases of the half-typed line: the word typed before the hole, and what the code after a line that
tree-sitter reads with the next ones needs of the fill."""

from __future__ import annotations

import pytest

from dice_lsp.completion.checks.context import CheckContext
from tests.checks.documents import context

HALF_TYPED_DECLARATION = ("void launch(const int n, int threads) {\n"
                          "    auto dv = std::div(n, threads);\n"
                          "    const int num_bl‸\n"
                          "    const int grid = (num_blocks == 0 ? 1 : num_blocks);\n"
                          "    dim3 g(grid, 1);\n}\n")


@pytest.mark.parametrize(("fill", "missing"), [
    ("ocks = (n + threads - 1) / threads;", []),
    ("_size = 0;", ["num_blocks"]),  # declares `num_bl_size`: the code below still needs `num_blocks`
    ("ock = 1;", ["num_blocks"]),
])
def test_a_half_typed_declaration_must_be_finished_as_the_code_after_it_uses_it(fill: str,
                                                                                missing: list[str]) -> None:
    """A half-typed line that merges with the next in tree-sitter's eyes hides the function's declarations from
    the scope; the word typed before the cursor still says which needed name the line declares."""
    checks = context(HALF_TYPED_DECLARATION)
    assert checks.undeclared(fill) == missing
    assert checks.check(fill).names is (not missing)


HALF_TYPED_LINES = {
    # a loop header typed up to its condition takes the next lines into it; the functions after the kernel
    # then read as part of recovery's error, so nothing after the hole is seen as declared
    "for": ("__global__ void k(float* out, int n) {\n"
            "    for (int iter = 0; ‸\n"
            "        const int row = iter * 2;\n"
            "        float v = out[row];\n"
            "        out[row] = helper(v);\n"
            "    }\n"
            "}\n"
            "__device__ float helper(float x) { return x; }\n"),
    # a qualifier typed alone makes the next line's declaration its own
    "shared": ("__global__ void k(float* out) {\n"
               "    __shared__ ‸\n"
               "    __shared__ float s_max;\n"
               "    s_max = out[0]; s_tid = 0;\n"
               "    out[s_tid] = s_max;\n"
               "}\n"),
    # the deleted rest of the line declared `v`, which the line below needs
    "declaration": ("__global__ void k(float* out, int n) {\n"
                    "    float ‸\n"
                    "    out[0] = v;\n"
                    "}\n"),
}


@pytest.mark.parametrize(("case", "fill", "missing"), [
    ("for", "iter < n; ++iter) {", []),  # `iter` is the typed header's; `row`, `v`, `helper` are declared after
    ("shared", "int s_tid;", []),
    ("shared", "float s_sum;", ["s_tid"]),
    ("declaration", "v = 0.f;", []),
    ("declaration", "w = 0.f;", ["v"]),
])
def test_a_half_typed_line_that_reads_as_one_with_the_next_demands_only_what_the_deleted_text_declared(
        case: str, fill: str, missing: list[str]) -> None:
    document = HALF_TYPED_LINES[case]
    at = document.index("‸")
    checks = CheckContext(document.replace("‸", ""), at, at)
    assert checks.undeclared(fill) == missing
    assert checks.check(fill).names is (not missing)


UNPARSED_KERNEL = """typedef float real;
extern "C" __global__ void computeEnergy(const float* __restrict__ posq, real* __restrict__ energyBuffer
#ifdef USE_CUTOFF
        , const int* __restrict__ tiles
#endif
        PARAMETER_ARGUMENTS) {
    real energy = 0;
    for (int tile = 0; tile < 4; tile++) {
        real tempEnergy = posq[tile];
        energy += tempEnergy;
    }
    if (threadIdx.x < 32) {
        real tempEn‸
        const real scale = 1.0f;
        energy += scale * tempEnergy;
    }
    energyBuffer[blockIdx.x] = energy;
}
"""


@pytest.mark.parametrize(("fill", "missing"), [
    ("actionScale = 0.0f;", ["tempEnergy"]),  # declares `tempEnactionScale`; the code below uses `tempEnergy`
    ("ergy = 0.0f;", []),
    ("ergy;", []),
])
def test_a_half_typed_declaration_in_a_function_tree_sitter_cannot_read_must_be_finished(
        fill: str, missing: list[str]) -> None:
    """`#ifdef`s through the parameter list (OpenMM's kernels): no function parses, so the names are judged by
    words; the earlier loop's own `tempEnergy` (a closed block) does not provide the one below."""
    checks = context(UNPARSED_KERNEL)
    assert checks.undeclared(fill) == missing
    assert checks.check(fill).names is (not missing)


@pytest.mark.parametrize(("typed", "fill", "names"), [
    ("return num_examp", "(out, 1);", False),  # a half-typed `num_examples` called as it is
    ("return num_examp", ";", False),
    ("return num_examp", "les;", True),  # finished
    ("MY_HEADER_MACRO", "(out);", True),  # a whole name typed once (a header's macro, not read here): the user's
    ("out[0] = num_examples", " + 1;", True),
    ("ret", ".copyTo(out, 1);", False),  # the start of `return`, taken for a variable (shown on a real file)
    ("ret", "urn;", True),
    ("con", "st int m = 1;", True),
])
def test_the_word_typed_before_the_hole_must_be_a_name_when_the_fill_ends_it(typed: str, fill: str,
                                                                             names: bool) -> None:
    text = "__global__ void k(float* out, int num_examples) {\n    " + typed + "\n}\n"
    at = text.index(typed) + len(typed)
    assert CheckContext(text, at, at).check(fill).names is names
