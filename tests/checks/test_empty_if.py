"""Golden cases of the rule on `if`s with an empty body."""

from __future__ import annotations

import pytest

from dice_lsp.completion.checks.rules.empty_if import RULE
from tests.checks.documents import judge_construct


@pytest.mark.parametrize(("fill", "ok"), [
    ("if (n == 0);", False),  # the statement after it runs either way
    ("if (n <= 0) ;", False),
    ("if (n == 0) return;", True),
    ("if (n == 0); else out[0] = 0.f;", True),  # odd, but the else does something
    ("while (n == 0);", True),  # a loop may spin on purpose
    ("if (n == 0) {}", True),  # an empty block is where the user writes next
])
def test_an_if_with_an_empty_body_does_not_pass(fill: str, ok: bool) -> None:
    judge_construct(RULE, fill, ok)
