"""The symbol table: what a document declares (kind, block, arity) and what a hole's scope says about a name."""

from __future__ import annotations

from dice_lsp.completion.checks.request import Request
from dice_lsp.toolchain.header_index import HeaderIndex

DOCUMENT = """#define SCALE 2
typedef float real;
__device__ float blend(float a, float b, float t = 0.5f);
__global__ void other(float* dst, int count) {
    int gid = threadIdx.x;
    dst[gid] = 0.f;
}
__global__ void k(real* out, int n) {
    for (int i = 0; i < n; ++i) {
        float done = out[i];
    }
    int tid = threadIdx.x;
    ‸
    if (tid < n) {
        float bias = 1.f;
        out[tid] = bias + later;
    }
    float later = 2.f;
}
"""


def request() -> Request:
    at = DOCUMENT.index("‸")
    return Request(DOCUMENT.replace("‸", ""), at, at, HeaderIndex.from_lines(["printf"]))


def test_declarations_have_a_kind_and_a_block() -> None:
    table = request().symbols
    kinds = {(d.name, d.kind) for d in table.declarations}
    assert {("SCALE", "macro"), ("real", "type"), ("blend", "variable"), ("t", "parameter"), ("k", "function"),
            ("count", "parameter"), ("gid", "variable"), ("done", "variable")} <= kinds
    data = table.data
    done = next(d for d in table.declarations if d.name == "done" and d.node.type == "declaration")
    block = done.block()
    assert block is not None and data[block[0]:block[1]].startswith(b"{\n        float done")
    assert next(d for d in table.declarations if d.name == "real").block() is None  # a type: not held to a block


def test_arities_are_those_of_the_functions_declared_outside_bodies() -> None:
    table = request().symbols
    assert table.arities["blend"] == [(2, 3)]
    assert table.arities["k"] == [(2, 2)]
    assert "SCALE" in table.functions  # a macro may stand for a function


def test_the_scope_at_the_hole() -> None:
    scope = request().scope
    # another kernel's, a closed loop's, declared later
    assert {"gid", "count", "dst", "i", "done", "bias"} <= scope.out_of_scope
    assert not {"tid", "n", "out"} & scope.out_of_scope
    assert scope.variable("tid") and scope.variable("printf") and not scope.variable("gid")
    assert {"tid", "n", "out"} <= scope.block_names and "done" not in scope.block_names
    assert scope.needed == {"later"}  # `bias` is declared below before its use, `later` only after it


def test_what_the_code_below_needs() -> None:
    text = DOCUMENT.replace("    int tid = threadIdx.x;\n", "")
    at = text.index("‸")
    needed = Request(text.replace("‸", ""), at, at).needed
    assert needed == {"tid", "later"}
