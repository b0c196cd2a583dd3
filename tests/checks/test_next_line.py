"""Golden cases of the rule on fills whose statement takes the next line as its rest."""

from __future__ import annotations

import pytest

from dice_lsp.completion.checks.rules.next_line import RULE
from tests.checks.documents import context

KERNEL = "__global__ void k(float* c, const float* a, int n) {\n    int i = 0;\n    ‸\n"
TWO_STATEMENTS = KERNEL + "    c[i] = a[i];\n}\n"
SPLIT_CALL = KERNEL + "        a[i], a[i + 1]);\n}\n"


@pytest.mark.parametrize(("case", "fill", "ok"), [
    (TWO_STATEMENTS, "int64_t end =", False),  # takes `c[i] = a[i];` as its initialiser, and parses
    (TWO_STATEMENTS, "c[i] = a[i] +", False),
    (TWO_STATEMENTS, "c[i] = 0.f;", True),
    (TWO_STATEMENTS, "if (i < n)", True),  # a guard for the line below: a statement of its own
    (TWO_STATEMENTS, "c[i] = 0.f;  // a +", True),
    (SPLIT_CALL, "c[i] = fmaxf(", True),  # the line below cannot stand alone: the fill opens what it closes
])
def test_a_fill_that_takes_the_next_statement_as_its_rest_does_not_pass(case: str, fill: str, ok: bool) -> None:
    checks = context(case)
    assert bool(checks.faults_of([RULE], fill)) is not ok
    assert checks.parses(fill) is ok
    if not ok:  # re-masking denoises the end that wants an operand
        assert checks.error_spans(fill) == [(len(fill) - 1, len(fill))]


def test_an_unclosed_call_fails_already_on_the_error_it_leaves() -> None:
    checks = context(TWO_STATEMENTS)
    assert not checks.faults_of([RULE], "float v = f(")  # (no `)` anywhere: the syntax errors rule rejects it)
    assert not checks.parses("float v = f(")
