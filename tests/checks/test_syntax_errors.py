"""Golden cases of the rule on parse errors a fill is to blame for."""

from __future__ import annotations

import pytest

from dice_lsp.completion.checks.context import CheckContext, parses
from dice_lsp.completion.checks.rules.syntax_errors import RULE
from dice_lsp.cuda.functions import parser
from tests.checks.documents import BODY, BODY_FILL, BROKEN_ELSEWHERE, INDEXING, KERNEL, MIDLINE, at_blank, context

MUST_FAIL = {  # fill: (document, why)
    "float maxval = = ;;": (KERNEL, "two `=` and no initializer"),
    "if ( = (int)threadIdx)ii;": (KERNEL, "an assignment with no left side in the condition"),
    "__syncthreads(tid = threadIdx.x();": (KERNEL, "the call's `(` is never closed, and threadIdx is no function"),
    "out[tid] = tile[x.];];];": (KERNEL, "a member access with no member, then stray `]`"),
    "acc += in[i];\n    }": (KERNEL, "an extra `}` closes the kernel early: the rest of its body is left outside"),
    "];];": (INDEXING, "`in[i` closed once, then a stray `]`"),
    "in[i] * ;": (MIDLINE, "the multiplication has no right operand"),
    BODY_FILL + "}\n": (BODY, "the body closed twice: a stray `}` before the next kernel"),
}


@pytest.mark.parametrize("fill", list(MUST_FAIL))
def test_fills_that_do_not_parse(fill: str) -> None:
    document, why = MUST_FAIL[fill]
    checks = context(document)
    assert checks.faults_of([RULE], fill), why
    assert not checks.parses(fill), why


MUST_PARSE = {  # fill: (document, why)
    "acc = in[i];": (BROKEN_ELSEWHERE, "the half-typed line is in another function"),
    "in[i] * 2.0f;": (MIDLINE, "finishes the half-typed line"),
    "];": (INDEXING, "closes the indexing expression and the statement"),
    BODY_FILL: (BODY, "a whole body that closes the kernel before the next one"),
    "if (i < n) {\n        acc = in[i];\n    } else {\n        acc = 0.0f;\n    }": (KERNEL, "blocks open and close"),
}


@pytest.mark.parametrize("fill", list(MUST_PARSE))
def test_fills_that_parse(fill: str) -> None:
    document, why = MUST_PARSE[fill]
    checks = context(document)
    assert not checks.faults_of([RULE], fill), why
    assert checks.parses(fill), why


def test_a_midline_fill_that_leaves_its_line_broken_does_not_parse() -> None:
    text = "__global__ void k(float* x, int n) {\n    int m = (n + \n    x[0] = m;\n}\n"
    at = text.index("(n + ") + len("(n + ")
    assert parses(text, at, at, "1) / 2;") is True
    assert parses(text, at, at, "1 /") is False


def test_a_mid_line_fill_is_judged_with_the_statement_it_finishes() -> None:
    text = "__global__ void k(float* out, int n) {\n    out[n] = \n}\n"
    at = text.index("= ") + 2
    assert parses(text, at, at, "0;") is True  # `out[n] = 0;`
    text = "__global__ void k(float* out, int n) {\n    out[n]\n}\n"
    at = text.index("[n]") + 3
    assert parses(text, at, at, ";") is False  # `out[n];`


def test_a_selection_region_is_replaced() -> None:
    """The region's old text is not part of the document the fill is judged in."""
    text = KERNEL.replace("‸", "float acc2 = = ;")
    start = text.index("float acc2")
    end = start + len("float acc2 = = ;")
    checks = CheckContext(text, start, end)
    assert checks.parses("acc += in[i];")
    assert not checks.parses("acc += in[i]")  # the missing `;` touches the fill


# Top-level macro calls that take an operator make tree-sitter give up on the whole file (one ERROR node): a
# fill there "sits in garbage left as it was" by the rules above, so any fill would pass.
OPERATOR_MACROS = "".join(f"BINARY_OP({t}, add, +);\nBINARY_OP({t}, mul, *);\n" for t in ("int8_t", "uint8_t"))
OPERATOR_MACROS += "HALF_OP(add, +);\nHALF_OP(mul, *);\n"
FILL_KERNEL = "__global__ void k(float* out, int n) {\n    int i = threadIdx.x;\n    \n    out[i] = 0.f;\n}\n"
FILLS = {"out[i] = 1.f;": True, "__syncthreads();": True, "out[i": False, "float maxval = = ;;": False,
         "}": False}


@pytest.mark.parametrize("text", [
    FILL_KERNEL + "\n" + OPERATOR_MACROS,  # the macros after the kernel
    OPERATOR_MACROS + "\n" + FILL_KERNEL,  # before it: tree-sitter reads the kernel itself as broken code
    "namespace ops {\n" + OPERATOR_MACROS + "\ntemplate <typename T>\n" + FILL_KERNEL + "}  // namespace ops\n",
])
def test_a_fill_in_a_file_tree_sitter_gives_up_on_is_judged_in_its_own_definition(text: str) -> None:
    assert parser().parse(text.encode()).root_node.type == "ERROR"  # the case this is about
    checks = at_blank(text)
    assert {fill: checks.parses(fill) for fill in FILLS} == FILLS
    assert checks.error_spans("out[i] = = 1;") == [(9, 10)]  # re-masking gets the broken part of the fill


def test_a_fill_in_an_error_it_cannot_be_judged_apart_from_adds_no_error_inside_it() -> None:
    text = FILL_KERNEL.removesuffix("}\n") + "\n" + OPERATOR_MACROS  # the kernel never closes: no definition
    checks = at_blank(text)
    assert [checks.parses(fill) for fill in ("out[i] = 1.f;", "__syncthreads();")] == [True, True]
    assert [checks.parses(fill) for fill in ("out[i", "float maxval = = ;;")] == [False, False]
