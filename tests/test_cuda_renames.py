"""Renaming what a fill names wrongly (`dice_lsp.cuda.renames`): golden corrections and refusals."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dice_lsp.completion.checks import Checks
from dice_lsp.completion.checks.context import CheckContext
from dice_lsp.cuda.renames import corrected, correction, edits, renamed

IN_SCOPE = ("cell_x", "cell_y", "threadIdx", "blockDim", "num_rows", "input", "output", "i", "j", "tx", "ty",
            "partial_sums")


@pytest.mark.parametrize(("name", "meant"), [
    ("cellx", "cell_x"),  # underscores
    ("blockdim", "blockDim"),  # case
    ("threadIdxx", "threadIdx"),  # one extra character
    ("nun_rows", "num_rows"),  # one replaced
    ("ouptut", "output"),  # two neighbours swapped
    ("partial_sum", "partial_sums"),  # one missing
    ("partialsum", "partial_sums"),  # 12 characters: two edits (underscore and s)
])
def test_a_near_miss_of_one_name_in_scope_is_corrected(name: str, meant: str) -> None:
    assert correction(name, IN_SCOPE) == meant


@pytest.mark.parametrize("name", [
    "k",  # short names are never edited: `k` is not a typo of `i`
    "I",  # not even for case: `I` and `i` may both be meant
    "tz",  # nor `tx`/`ty` (and it is a tie)
    "cell_z",  # one edit from cell_x and from cell_y: a tie corrects nothing
    "level_code",  # nothing close
    "inpt_data",  # `input` plus more: five edits away
])
def test_no_correction_when_nothing_is_close_or_two_names_are(name: str) -> None:
    assert correction(name, IN_SCOPE) is None


def test_a_name_that_exists_is_not_corrected() -> None:
    assert correction("cell_x", [*IN_SCOPE, "cellx"]) is None


def test_every_unknown_name_of_a_fill_is_replaced_in_place() -> None:
    fill = "outptu[cellx] = inptu[cellx];"
    unknown = [(0, "outptu"), (7, "cellx"), (16, "inptu"), (22, "cellx")]
    assert corrected(fill, unknown, IN_SCOPE) == "output[cell_x] = input[cell_x];"


def test_a_fill_with_one_name_beyond_correction_is_left_to_the_other_repairs() -> None:
    assert corrected("y[cellx] = level_code;", [(2, "cellx"), (11, "level_code")], IN_SCOPE) is None


@given(st.text("abcxyz_", max_size=9), st.text("abcxyz_", max_size=9))
def test_the_bounded_distance_is_the_distance_up_to_its_bound(a: str, b: str) -> None:
    full = edits(a, b, 100)
    assert edits(a, b, 2) == min(full, 3)
    assert full == edits(b, a, 100)
    assert (full == 0) == (a == b)


KERNEL = ("__global__ void relu(const float* X, float* Y, int N) {\n"
          "    \n"
          "    for (int i = _loop_start; i < N; i += 1) Y[i] = X[i] > 0 ? X[i] : 0;\n"
          "}\n")
HOLE = KERNEL.index("    \n") + 4


def checks() -> CheckContext:
    return CheckContext(KERNEL, HOLE, HOLE)


@pytest.mark.parametrize(("fill", "repaired"), [
    ("int loop_stride = blockIdx.x * blockDim.x + threadIdx.x;",
     "int _loop_start = blockIdx.x * blockDim.x + threadIdx.x;"),  # declared under another name
    ("int N = blockIdx.x;", "int _loop_start = blockIdx.x;"),  # a name the block has (a parameter)
    ("const int start = blockIdx.x * blockDim.x;", "const int _loop_start = blockIdx.x * blockDim.x;"),
    ("int loop_start = threadIdxx.x;", "int _loop_start = threadIdx.x;"),  # a misspelling too
])
def test_the_declaration_takes_the_name_the_code_below_needs(fill: str, repaired: str) -> None:
    context = checks()
    assert not context.check(fill).names
    assert renamed(fill, context) == repaired
    assert context.check(repaired) == Checks(True, True)


@pytest.mark.parametrize("fill", [
    "Y[0] = X[0];",  # declares nothing: nothing to rename
    "int a = 0, b = 1;",  # two names: which one is meant is not known
    "int _loop_start = 0;",  # already right
    "int start = level_code;",  # a name beyond correction stays wrong
])
def test_nothing_is_renamed_where_the_repair_is_not_certain(fill: str) -> None:
    assert renamed(fill, checks()) is None
