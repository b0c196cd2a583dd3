"""Golden cases of the rule on integers initialised with a fraction."""

from __future__ import annotations

import pytest

from dice_lsp.completion.checks.rules.fraction_into_integer import RULE
from tests.checks.documents import judge_construct


@pytest.mark.parametrize(("fill", "ok"), [
    ("int blocks = 1.8;", False),  # the fraction is dropped (-Wliteral-conversion)
    ("unsigned int u = 0.5f;", False),
    ("int e = 1e-3;", False),
    ("int two = 2.0;", True),  # no fraction lost
    ("size_t m = 1e3;", True),
    ("float f = 1.5;", True),
])
def test_a_fraction_into_an_integer_does_not_pass(fill: str, ok: bool) -> None:
    judge_construct(RULE, fill, ok)
