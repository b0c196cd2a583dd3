"""Golden cases of the rule on types written as statements of their own."""

from __future__ import annotations

import pytest

from dice_lsp.completion.checks.rules.type_alone import RULE
from tests.checks.documents import judge_construct


@pytest.mark.parametrize(("fill", "ok"), [
    ("typename Offset;", False),  # a type alone declares nothing
    ("int;", False),
    ("int m = 0;", True),
])
def test_a_type_alone_does_not_pass(fill: str, ok: bool) -> None:
    judge_construct(RULE, fill, ok)
