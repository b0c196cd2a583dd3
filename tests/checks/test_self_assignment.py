"""Golden cases of the rule on variables assigned to themselves."""

from __future__ import annotations

import pytest

from dice_lsp.completion.checks.rules.self_assignment import RULE
from tests.checks.documents import judge_construct


@pytest.mark.parametrize(("fill", "ok"), [
    ("out[n] = out[n];", False),  # assigned to itself
    ("out[n] = (out[n]);", False),  # in parentheses
    ("out[n] -= out[n];", False),  # a constant written the long way
    ("n ^= n;", False),
    ("out[0] = (n = n);", False),  # not a statement of its own
    ("out[n] += out[n];", True),  # twice
    ("out[n] *= out[n];", True),  # squares
])
def test_a_variable_assigned_to_itself_does_not_pass(fill: str, ok: bool) -> None:
    judge_construct(RULE, fill, ok)
