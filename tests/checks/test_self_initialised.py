"""Golden cases of the rule on variables initialised with themselves."""

from __future__ import annotations

import pytest

from dice_lsp.completion.checks.rules.self_initialised import RULE
from tests.checks.documents import judge_construct


@pytest.mark.parametrize(("fill", "ok"), [
    ("int m = m * 2;", False),  # read before it is set
    ("int m = n * 2;", True),
    ("int m = sizeof(m);", True),
    ("int n2 = Cfg::n2;", True),  # another `n2`
])
def test_a_variable_initialised_with_itself_does_not_pass(fill: str, ok: bool) -> None:
    judge_construct(RULE, fill, ok)
