"""Golden cases of the rule on names the code after the hole needs that the fill leaves undeclared."""

from __future__ import annotations

import pytest

from dice_lsp.completion.checks.context import CheckContext
from dice_lsp.completion.checks.rules.undeclared import RULE
from dice_lsp.evals.suite import load_suite
from dice_lsp.toolchain.header_index import HeaderIndex, fallback_names
from tests.checks.documents import at_blank, context

USES_TID = "__global__ void k(float* out, int n) {\n    \n    if (tid < n) out[tid] = 0.f;\n}\n"


@pytest.mark.parametrize(("fill", "missing"), [
    ("int tid = blockIdx.x * blockDim.x + threadIdx.x;", []),
    ("int i = blockIdx.x * blockDim.x + threadIdx.x;", ["tid"]),  # the code below needs `tid`
    ("__syncthreads();", ["tid"]),
])
def test_a_fill_must_declare_what_the_code_after_it_needs(fill: str, missing: list[str]) -> None:
    checks = at_blank(USES_TID)
    assert checks.undeclared(fill) == missing
    assert [fault.name for fault in checks.faults_of([RULE], fill)] == missing
    assert checks.check(fill).names is (not missing)


def test_names_a_macro_or_the_file_declares_are_not_demanded() -> None:
    text = ("#define LOOP(i, n) for (int i = 0; i < n; ++i)\n"
            "__global__ void k(float* out, int n) {\n    \n    LOOP(j, n) out[j] = 0.f;\n}\n")
    assert at_blank(text).undeclared("__syncthreads();") == []


OTHER_KERNEL = ("// idx: the element this thread writes\n"
                "__global__ void first(float* out, int n) {\n"
                "    int idx = threadIdx.x;\n    out[idx] = table[idx];\n}\n")


@pytest.mark.parametrize(("kernel", "fill", "missing"), [
    # another kernel's local (and a comment's word) provides nothing here: the fill must declare `idx`
    ("__global__ void k(float* out) {\n    \n    out[idx] = 0.f;\n}\n", "__syncthreads();", ["idx"]),
    ("__global__ void k(float* out) {\n    \n    out[idx] = 0.f;\n}\n", "int idx = threadIdx.x;", []),
    # `table` is used by the other kernel without being declared there: a global from a header not shown
    ("__global__ void k(float* out) {\n    \n    out[0] = table[0];\n}\n", "__syncthreads();", []),
    # declared in this kernel after the hole (in a later block): not demanded of the fill
    ("__global__ void k(float* out) {\n    \n    { int idx = 1; out[idx] = 0.f; }\n}\n", "__syncthreads();", []),
])
def test_names_other_functions_declare_for_themselves_are_demanded(kernel: str, fill: str,
                                                                   missing: list[str]) -> None:
    assert at_blank(OTHER_KERNEL + kernel).undeclared(fill) == missing


def test_a_name_the_headers_declare_only_in_a_namespace_is_demanded_of_the_fill() -> None:
    text = "__global__ void k(int* out) {\n    \n    out[0] = count;\n}\n"
    headers = HeaderIndex(globals=frozenset({"printf"}), scoped=frozenset({"count"}))  # std::count
    assert at_blank(text, headers).undeclared("__syncthreads();") == ["count"]
    assert at_blank("using namespace std;\n" + text, headers).undeclared("__syncthreads();") == []


BRANCHES = """__global__ void norm(const float* in, float* out, int n, bool wide) {
    if (wide) {
        int threads = 256;
        for (int col = threadIdx.x; col < n; col += threads) {
            ‸
            out[col] = val * val;
        }
    } else {
        float val = in[threadIdx.x];
        int threads = 64;
        out[threadIdx.x] = in[threadIdx.x] * threads;
    }
}
"""


def test_a_declaration_below_provides_a_name_only_to_the_code_in_its_scope_after_it() -> None:
    """The line `float val = ...;` deleted in the first branch: the second branch's own `val` does not provide the
    name that the first branch's code below the hole uses."""
    at = BRANCHES.index("‸")
    checks = CheckContext(BRANCHES.replace("‸", ""), at, at)
    assert checks.undeclared("out[col] = 0.f;") == ["val"]
    assert checks.undeclared("float val = in[col];") == []
    assert checks.check("out[col] = 0.f;").names is False


def test_the_name_a_declaration_below_declares_is_not_demanded_of_the_fill() -> None:
    """`__shared__ alignas(16)` typed above an emptied line reads with the next line's declaration as one: its
    own name (`bytes`, where it is declared) is not needed from the fill."""
    document = ("__global__ void k(float* out) {\n    __shared__ alignas(16)\n        float in_sh[32];\n"
                "    __shared__ alignas(16)\n        ‸\n    constexpr int bytes = sizeof(in_sh);\n"
                "    out[0] = bytes;\n}\n")
    assert context(document).undeclared("float out_sh[32];") == []


@pytest.mark.parametrize(("document", "fill"), [
    # a loop without braces whose body is the half-typed line: its variable is in scope there
    ("__global__ void k(int* out) {\n    for (int i = 0; i < 4; ++i)\n        out[i] ‸\n    out[0] = 1;\n}\n",
     "= i;"),
    ("__global__ void k(int* out, int n) {\n    int negs[4];\n    int count = 0;\n    for (int i = 0; i < 4; ++i)\n"
     "        if (out[i] < 0)\n            negs[count++] ‸\n\n    if (count == 3) {\n        out[0] = negs[1];\n"
     "    }\n}\n", "= i;"),
])
def test_names_stay_in_scope_where_the_hole_s_statement_runs_on(document: str, fill: str) -> None:
    checks = context(document)
    assert checks.unknown_names(fill) == []
    assert checks.undeclared(fill) == []


@pytest.mark.parametrize(("key", "start", "end"), [
    ("transformer-engine-torch/0001", 4745, 4766),  # `], is_master_thread);` ends a call the lines above opened
    ("transformer-engine-torch/0001", 4726, 4766),
    ("onnxruntime/0023", 12145, 12150),  # `zp1);`, the last argument of a call over six lines
])
def test_true_lines_that_end_a_statement_the_lines_above_began_pass(key: str, start: int, end: int) -> None:
    """Dev-split files: with the call open at the hole, tree-sitter reads the rest of the file as its arguments,
    so its blocks say nothing there and names declared below stay provided to all the code below."""
    from dice_lsp.cuda.holes import find_hole
    from dice_lsp.cuda.postprocess import FillContext, postprocess

    text = load_suite(split="dev").files[key].text
    document = text[:start] + text[end:]
    hole = find_hole(document, start)
    assert hole is not None
    fill_context = FillContext(hole, document[:hole.start], document[hole.end:])
    truth = postprocess(text[start:end], fill_context)
    assert truth is not None
    checks = CheckContext(fill_context.before + fill_context.after, hole.start, hole.start, fallback_names())
    assert checks.check(truth).names
