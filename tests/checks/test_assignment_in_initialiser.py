"""Golden cases of the rule on declarations initialised by assigning another variable."""

from __future__ import annotations

import pytest

from dice_lsp.completion.checks.rules.assignment_in_initialiser import RULE
from tests.checks.documents import judge_construct


@pytest.mark.parametrize(("fill", "ok"), [
    ("int m = n = 0;", False),  # a declaration that assigns another variable
    ("float v = out[n] = 0.f;", True),  # storing on the way (`T val = buffer[tid] = init;` in real kernels)
    ("n = out[0] = 0;", True),  # a chain as a statement
])
def test_a_declaration_that_assigns_another_variable_does_not_pass(fill: str, ok: bool) -> None:
    judge_construct(RULE, fill, ok)
