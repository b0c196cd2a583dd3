"""Golden cases of the rule on constants and `auto` variables declared without a value."""

from __future__ import annotations

import pytest

from dice_lsp.completion.checks.rules.constant_without_value import RULE
from tests.checks.documents import judge_construct


@pytest.mark.parametrize(("fill", "ok"), [
    ("const int y, m = 1;", False),  # a constant without a value
    ("auto z;", False),
    ("const int q = 3;", True),
    ("int r;", True),
])
def test_a_constant_without_a_value_does_not_pass(fill: str, ok: bool) -> None:
    judge_construct(RULE, fill, ok)
