"""Golden cases of the rule on values returned from `void` functions."""

from __future__ import annotations

import pytest

from dice_lsp.completion.checks.rules.void_return import RULE
from tests.checks.documents import VOID_KERNEL, context

VALUE_FUNCTION = "__device__ int twice(int n) {\n    ‸\n}\n"


@pytest.mark.parametrize(("case", "fill", "ok"), [
    (VOID_KERNEL, "return n;", False),  # a kernel returns nothing
    (VOID_KERNEL, "if (n < 0) return;", True),
    (VALUE_FUNCTION, "return 2 * n;", True),
    (VOID_KERNEL, "auto f = [](int x) { return x; };", True),  # a lambda's return is its own
])
def test_a_value_returned_from_a_void_function_does_not_pass(case: str, fill: str, ok: bool) -> None:
    checks = context(case)
    assert bool(checks.faults_of([RULE], fill)) is not ok
    assert checks.parses(fill) is ok
