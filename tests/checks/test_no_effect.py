"""Golden cases of the rule on expression statements that do nothing."""

from __future__ import annotations

import pytest

from dice_lsp.completion.checks.rules.no_effect import RULE
from tests.checks.documents import judge_construct


@pytest.mark.parametrize(("fill", "ok"), [
    ("out[n];", False),  # compiles with a warning, never meant
    ("n + 1;", False),
    ("*out;", False),
    ("(out[0]);", False),
    ("__syncthreads;", False),  # the function named, not called
    ("out, n;", False),  # a comma of names
    ("Iterator<float, int>;", False),  # a template named, not used
    ("__syncthreads();", True),
    ("out[n] = 1.f;", True),
    ("++n;", True),
    ("(void)n;", True),  # does nothing on purpose
    ("NO_DEVICE_CODE;", True),  # an all-caps name: a macro that may expand to a statement
    ("std::cout << n;", True),  # a stream's `<<`
    ("out[0] = 1.f, n++;", True),
])
def test_a_statement_that_does_nothing_does_not_pass(fill: str, ok: bool) -> None:
    judge_construct(RULE, fill, ok)
