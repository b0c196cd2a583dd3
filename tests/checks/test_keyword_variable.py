"""Golden cases of the rule on value keywords declared as variables."""

from __future__ import annotations

import pytest

from dice_lsp.completion.checks.rules.keyword_variable import RULE
from tests.checks.documents import judge_construct


@pytest.mark.parametrize(("fill", "ok"), [
    ("gflags  false;", False),  # tree-sitter: a variable `false` of type `gflags`
    ("float nullptr = 0.f;", False),
    ("bool done = false;", True),
    ("float this_scale = 1.f;", True),
])
def test_a_value_keyword_is_no_variable_name(fill: str, ok: bool) -> None:
    judge_construct(RULE, fill, ok)
