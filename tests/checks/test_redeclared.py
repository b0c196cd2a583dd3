"""Golden cases of the rule on names a fill declares again in its block."""

from __future__ import annotations

import pytest

from dice_lsp.completion.checks import Checks
from dice_lsp.completion.checks.rules.redeclared import RULE
from tests.checks.documents import KERNEL, context

REDECLARED = {  # fill: (expected, why)
    "int n = 4;": ([(4, "n")], "the kernel's parameter, declared again in its body's own block"),
    "float acc = 1.0f;": ([(6, "acc")], "a local of the same block"),
    "for (int i = 0; i < n; ++i) acc += in[i];": ([], "a loop's variable has its own scope"),
    "if (n > 0) {\n        int tid = 0;\n        acc += tid;\n    }": ([], "a nested block may shadow"),
    "float v = acc;": ([], "a new name"),
}


@pytest.mark.parametrize("fill", list(REDECLARED))
def test_a_fill_must_not_declare_a_name_its_block_has(fill: str) -> None:
    expected, why = REDECLARED[fill]
    checks = context(KERNEL)
    assert checks.redeclared(fill) == expected, why
    assert bool(checks.faults_of([RULE], fill)) is bool(expected), why
    assert checks.check(fill) == Checks(True, not expected), why


@pytest.mark.parametrize(("fill", "ok"), [
    ("n = 0;", False),  # `int ` typed, then `n`: the kernel's parameter declared twice
    ("m = 0;", True),
])
def test_the_half_typed_line_s_own_declaration_counts(fill: str, ok: bool) -> None:
    checks = context("__global__ void k(float* out, int n) {\n    int ‸\n    out[0] = 0.f;\n}\n")
    assert (checks.redeclared(fill) == []) is ok


def test_the_fill_s_declarations_are_named_for_the_renames() -> None:
    checks = context(KERNEL)
    assert checks.declarations("int j = 0, k2 = 1;") == [(4, "j"), (11, "k2")]
    assert checks.declarations("for (int j = 0; j < n; ++j) acc += in[j];") == []  # the loop's own scope
