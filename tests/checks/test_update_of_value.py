"""Golden cases of the rule on `++`/`--` applied to a value."""

from __future__ import annotations

import pytest

from dice_lsp.completion.checks.rules.update_of_value import RULE
from tests.checks.documents import judge_construct


@pytest.mark.parametrize(("fill", "ok"), [
    ("for (int i = 0; i < n; ++i++) {}", False),  # `i++` is a value: it cannot be incremented
    ("for (int i = 0; i < n; ++i) {}", True),
    ("++(*out);", True),
])
def test_an_update_of_a_value_does_not_pass(fill: str, ok: bool) -> None:
    judge_construct(RULE, fill, ok)
