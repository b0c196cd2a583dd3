"""Golden cases of the rule on zero-length local arrays."""

from __future__ import annotations

import pytest

from dice_lsp.completion.checks.rules.zero_length_array import RULE
from tests.checks.documents import judge_construct


@pytest.mark.parametrize(("fill", "ok"), [
    ("float items[0];", False),  # no storage
    ("float items[4];", True),
])
def test_a_zero_length_local_array_does_not_pass(fill: str, ok: bool) -> None:
    judge_construct(RULE, fill, ok)
