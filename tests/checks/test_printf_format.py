"""Golden cases of the rule on printf formats that do not match their values."""

from __future__ import annotations

import pytest

from dice_lsp.completion.checks.rules.printf_format import RULE
from tests.checks.documents import judge_construct


@pytest.mark.parametrize(("fill", "ok"), [
    ('printf("<%d, %d> %s");', False),  # the format asks for three values, none given
    ('printf("%d\\n", n, n);', False),
    ('snprintf(buf, 8, "%d");', False),
    ('printf("%d %f\\n", n, out[n]);', True),
    ('printf("%5.*f%%\\n", n, out[n]);', True),  # `*` takes a value, `%%` none
    ('fprintf(stderr, "%d of %d\\n", n, n);', True),
])
def test_a_printf_format_that_does_not_match_its_values_does_not_pass(fill: str, ok: bool) -> None:
    judge_construct(RULE, fill, ok)
