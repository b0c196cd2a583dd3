"""Golden cases of the rule on arrays initialised from a value."""

from __future__ import annotations

import pytest

from dice_lsp.completion.checks.rules.array_from_value import RULE
from tests.checks.documents import judge_construct


@pytest.mark.parametrize(("fill", "ok"), [
    ("int warpMask[0] = n;", False),  # shown on a real file (docs/bench-logs/real_code/set3_*), then withheld
    ("int w[4] = mask;", False),
    ("int w[4] = {1, 2};", True),
    ('char s[8] = "abc";', True),
])
def test_an_array_from_a_value_does_not_pass(fill: str, ok: bool) -> None:
    judge_construct(RULE, fill, ok)
