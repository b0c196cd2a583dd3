"""Golden cases of the rule on literal suffixes no code may define."""

from __future__ import annotations

import pytest

from dice_lsp.completion.checks.rules.literal_suffix import RULE
from tests.checks.documents import judge_construct


@pytest.mark.parametrize(("fill", "ok"), [
    ("*out = 0x;", False),  # `0x`: a hex literal with no digits, read by tree-sitter as 0 with suffix `x`
    ("*out = 1.x;", False),
    ("*out = 0x1F;", True),
    ("*out = 1.5e-3f;", True),
    ("*out = 10_units;", True),  # a user-defined literal: its suffix starts with `_`
])
def test_a_literal_suffix_no_code_may_define_does_not_pass(fill: str, ok: bool) -> None:
    judge_construct(RULE, fill, ok)
