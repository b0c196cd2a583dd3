"""Golden cases of the rule on structured bindings typed other than `auto`."""

from __future__ import annotations

import pytest

from dice_lsp.completion.checks.rules.typed_binding import RULE
from tests.checks.documents import judge_construct


@pytest.mark.parametrize(("fill", "ok"), [
    ("float[i] = out[i];", False),  # a structured binding needs `auto`
    ("auto [a, b] = pair;", True),
])
def test_a_structured_binding_typed_other_than_auto_does_not_pass(fill: str, ok: bool) -> None:
    judge_construct(RULE, fill, ok)
