"""Golden cases of the rule on numbers indexed by numbers."""

from __future__ import annotations

import pytest

from dice_lsp.completion.checks.rules.number_indexed import RULE
from tests.checks.documents import judge_construct


@pytest.mark.parametrize(("fill", "ok"), [
    ("out[0] = 10[1];", False),
    ("out[0] = out[1];", True),
])
def test_a_number_indexed_by_a_number_does_not_pass(fill: str, ok: bool) -> None:
    judge_construct(RULE, fill, ok)
