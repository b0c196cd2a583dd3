"""Golden cases of the rule on loop updates that do nothing."""

from __future__ import annotations

import pytest

from dice_lsp.completion.checks.rules.idle_loop_update import RULE
from tests.checks.documents import context, judge_construct


@pytest.mark.parametrize(("fill", "ok"), [
    ("for (int i = 0; i < n; i) out[i] = 0.f;", False),  # the loop never moves on by itself
    ("for (int i = 0; i < n; i + 1) out[i] = 0.f;", False),
    ("for (int i = 0; i < n; (i)) out[i] = 0.f;", False),
    ("for (int i = 0; i < n; out[i]) out[i] = 0.f;", False),
    ("for (int i = 0; i < n; i++) out[i] = 0.f;", True),
    ("for (int i = 0; i < n; i += 4) out[i] = 0.f;", True),
    ("for (int i = 0, j = n; i < j; ++i, --j) out[i] = out[j];", True),
    ("for (int i = 0; i < n; ++i, out) out[i] = 0.f;", True),  # one part moves the loop on
    ("for (int i = 0; i < n;) out[i++] = 0.f;", True),  # no update: the body moves it
])
def test_a_loop_update_that_does_nothing_does_not_pass(fill: str, ok: bool) -> None:
    judge_construct(RULE, fill, ok)


def test_re_masking_denoises_the_update_alone_again() -> None:
    for fill in ("for (int i = 0; i < n; i) out[i] = 0.f;", "for (int i = 0; i < n; i + 1) out[i] = 0.f;",
                 "for (int i = 0; i < n; (i)) out[i] = 0.f;"):
        spans = context("__global__ void k(float* out, int n) {\n    ‸\n}\n").error_spans(fill)
        assert spans and all(fill[lo:hi] in ("i", "i + 1", "(i)") for lo, hi in spans), spans
