"""Golden cases of the rule on names a fill declares again in its block."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dice_lsp.completion.checks import Checks
from dice_lsp.completion.checks.rules.redeclared import RULE
from tests.checks.documents import KERNEL, context

REDECLARED = {  # fill: (expected, why)
    "int n = 4;": ([(4, "n")], "the kernel's parameter, declared again in its body's own block"),
    "float acc = 1.0f;": ([(6, "acc")], "a local of the same block"),
    "for (int i = 0; i < n; ++i) acc += in[i];": ([], "a loop's variable has its own scope"),
    "if (n > 0) {\n        int tid = 0;\n        acc += tid;\n    }": ([], "a nested block may shadow"),
    "float v = acc;": ([], "a new name"),
}


@pytest.mark.parametrize("fill", list(REDECLARED))
def test_a_fill_must_not_declare_a_name_its_block_has(fill: str) -> None:
    expected, why = REDECLARED[fill]
    checks = context(KERNEL)
    assert checks.redeclared(fill) == expected, why
    assert bool(checks.faults_of([RULE], fill)) is bool(expected), why
    assert checks.check(fill) == Checks(True, not expected), why


@pytest.mark.parametrize(("fill", "ok"), [
    ("n = 0;", False),  # `int ` typed, then `n`: the kernel's parameter declared twice
    ("m = 0;", True),
])
def test_the_half_typed_line_s_own_declaration_counts(fill: str, ok: bool) -> None:
    checks = context("__global__ void k(float* out, int n) {\n    int ‸\n    out[0] = 0.f;\n}\n")
    assert (checks.redeclared(fill) == []) is ok


def test_the_fill_s_declarations_are_named_for_the_renames() -> None:
    checks = context(KERNEL)
    assert checks.declarations("int j = 0, k2 = 1;") == [(4, "j"), (11, "k2")]
    assert checks.declarations("for (int j = 0; j < n; ++j) acc += in[j];") == []  # the loop's own scope


# The hole's statement goes on below its line (a call's arguments): the text without the fill does not parse there,
# which is the hole's own error, and the block's declarations still hold.
GOES_ON = ("__global__ void add(const half2* a, const half2* b, float2* out, int n) {\n"
           "    int i = threadIdx.x;\n"
           "    float2 ‸\n"
           "        a[i]);\n"
           "    float2 lb = __half22float2(\n"
           "        b[i]);\n"
           "    out[i] = make_float2(la.x + lb.x, la.y + lb.y);\n"
           "}\n")


@pytest.mark.parametrize(("fill", "expected"), [
    ("lb = __half22float2(", [(0, "lb")]),  # the next statement's name
    ("la = __half22float2(", []),
])
def test_a_statement_that_goes_on_below_the_hole_is_judged_in_its_block(fill: str, expected: list) -> None:
    checks = context(GOES_ON)
    assert checks.redeclared(fill) == expected
    assert checks.check(fill) == Checks(True, not expected)


def test_a_name_the_code_below_needs_is_still_demanded_when_the_statement_goes_on() -> None:
    checks = context(GOES_ON)
    assert checks.needed == frozenset({"la"})
    assert checks.check("x = __half22float2(") == Checks(True, False)


def test_an_expression_begun_above_the_hole_s_line_is_the_hole_s_statement() -> None:
    checks = context("__global__ void k(const float* a, float* out, int n) {\n"
                     "    int i = threadIdx.x;\n"
                     "    float s = a[i] +\n"
                     "        ‸\n"
                     "            a[i + 1]);\n"
                     "    float t = s;\n"
                     "    out[i] = t;\n"
                     "}\n")
    request = checks.request
    assert request.statement_lines == (request.data.index(b"    float s"), request.data.index(b"\n    float t"))
    assert request.enclosing is not None
    assert request.scope.block_names == {"a", "out", "n", "i", "t"}  # `s`: the hole's own statement


@settings(max_examples=200, deadline=None)
@given(text=st.text(st.sampled_from("ab(),;{}=+\n #"), max_size=80), at=st.integers(0, 80))
def test_the_statement_s_lines_hold_the_hole_s_line_and_are_whole_lines(text: str, at: int) -> None:
    """Any text, any hole: the statement's lines contain the hole's line and start and end at line boundaries."""
    from dice_lsp.completion.checks.request import Request

    at = min(at, len(text))
    request = Request(text, at, at)
    low, high = request.statement_lines
    line_start, line_end = request.hole_line
    data = request.data
    assert low <= line_start <= request.hole <= line_end <= high <= len(data)
    assert (low == 0 or data[low - 1:low] == b"\n") and (high == len(data) or data[high:high + 1] == b"\n")


# Macro-laden code tree-sitter cannot place (LAMMPS's `__kernel void k(const __global numtyp4 *restrict x_, ...)`):
# the block is found by its braces and its own lines are read as declarations.
MACRO_LADEN = ("__kernel void k_born(const __global numtyp4 *restrict x_, __global acctyp4 *restrict ans,\n"
               "                     const int inum) {\n"
               "  int ii = GLOBAL_ID_X;\n"
               "  if (ii < inum) {\n"
               "    numtyp r = ucl_sqrt(rsq);\n"
               "    numtyp r6inv = r2inv*r2inv*r2inv;\n"
               "    ‸\n"
               "    for (int k = 0; k < 3; k++) {\n"
               "      numtyp t = r;\n"
               "    }\n"
               "    ans[ii] = r6inv;\n"
               "  }\n"
               "}\n")


@pytest.mark.parametrize(("fill", "expected"), [
    ("numtyp r = ucl_sqrt(rsq);", [(7, "r")]),  # the block's own `r`, two lines above
    ("numtyp t = r;", []),  # declared only in the loop's nested block
    ("numtyp ii = r;", []),  # the enclosing block's: a nested block may shadow
    ("numtyp rinv = ucl_recip(r);", []),
])
def test_where_the_function_does_not_parse_the_block_s_own_lines_are_read(fill: str, expected: list) -> None:
    checks = context(MACRO_LADEN)
    assert checks.request.enclosing is None  # (else this would test the scope, not the text)
    assert checks.redeclared(fill) == expected


def test_declarations_in_comments_do_not_count_where_the_text_is_read() -> None:
    case = MACRO_LADEN.replace("    numtyp r = ucl_sqrt(rsq);\n",
                               "    /* numtyp q = 1;\n       numtyp s = 2; */\n    // numtyp u = 3;\n"
                               "    numtyp r = ucl_sqrt(rsq);\n")
    checks = context(case)
    assert checks.request.enclosing is None
    assert [checks.redeclared(f"numtyp {name} = r;") for name in "qsur"] == [[], [], [], [(7, "r")]]
