"""Golden cases of the rule on operators between an operand and itself."""

from __future__ import annotations

import pytest

from dice_lsp.completion.checks.rules.same_operands import RULE
from tests.checks.documents import judge_construct


@pytest.mark.parametrize(("fill", "ok"), [
    ("if (n >= n) out[0] = 1;", False),
    ("out[0] = n - n;", False),
    ("if (0 == 0) out[0] = 1;", False),  # `if (0 == 0) {` was shown on the dev split
    ("out[0] = (out[n] != out[n]);", True),  # how code tests for NaN
    ("out[0] = NUM - NUM;", True),  # macros (real kernels write it)
    ("out[0] = out[n] - out[n - 1];", True),
])
def test_an_operator_between_an_operand_and_itself_does_not_pass(fill: str, ok: bool) -> None:
    judge_construct(RULE, fill, ok)
