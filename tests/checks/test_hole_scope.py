"""The scope at a hole: which names are in scope there, which the code below needs, which the hole's block has."""

from __future__ import annotations

from dice_lsp.completion.checks.request import Request
from tests.checks.documents import SCOPED, scoped


def test_the_scope_at_the_hole() -> None:
    scope = scoped().scope
    # another kernel's, a closed loop's, declared later
    assert {"gid", "count", "dst", "i", "done", "bias"} <= scope.out_of_scope
    assert not {"tid", "n", "out"} & scope.out_of_scope
    assert scope.variable("tid") and scope.variable("printf") and not scope.variable("gid")
    assert {"tid", "n", "out"} <= scope.block_names and "done" not in scope.block_names
    assert scope.needed == {"later"}  # `bias` is declared below before its use, `later` only after it


def test_what_the_code_below_needs() -> None:
    text = SCOPED.replace("    int tid = threadIdx.x;\n", "")
    at = text.index("‸")
    needed = Request(text.replace("‸", ""), at, at).needed
    assert needed == {"tid", "later"}
