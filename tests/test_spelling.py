"""Candidates equal up to the order of index arithmetic's operands are one, spelt as the user's code spells it."""

from __future__ import annotations

import pytest

from dice_lsp.completion.spelling import key

TEXTBOOK = "int i = blockIdx.x * blockDim.x + threadIdx.x;"


@pytest.mark.parametrize("other", [
    "int i = blockDim.x * blockIdx.x + threadIdx.x;",
    "int i = threadIdx.x + blockIdx.x * blockDim.x;",
    "int  i = threadIdx.x+blockDim.x*blockIdx.x ;",
])
def test_the_orders_of_a_thread_index_are_one_candidate(other: str) -> None:
    assert key(other) == key(TEXTBOOK)


@pytest.mark.parametrize(("one", "other"), [
    (TEXTBOOK, "int i = blockIdx.x * blockDim.x - threadIdx.x;"),  # `-` does not commute
    ("C = A * B;", "C = B * A;"),  # no built-in: could be a user's matrices
    ("x = a / b * c;", "x = a / c * b;"),  # `(a / b) * c`: the division is no operand to reorder
    ("int j = blockIdx.y * blockDim.y + threadIdx.y;", "int j = blockIdx.y * blockDim.x + threadIdx.y;"),
    ("y = (blockIdx.x + 1) * n;", "y = (n + 1) * blockIdx.x;"),
])
def test_what_could_mean_something_else_stays_apart(one: str, other: str) -> None:
    assert key(one) != key(other)


def test_a_loop_header_keys_with_its_body_closed() -> None:
    assert key("for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {") == key(
        "for (int i = threadIdx.x + blockIdx.x * blockDim.x; i < n; i += gridDim.x * blockDim.x) {")


def test_a_text_that_does_not_parse_keys_as_itself() -> None:
    assert key("a + b) {") == "a + b) {"


@pytest.mark.slow
def test_the_workspace_s_spelling_of_the_rule_s_index_is_shown_with_both_votes() -> None:
    """The rules write the textbook index; a file of the project writes the same index its own way after the same
    lines: the editor shows the project's spelling, as one candidate both sources voted for."""
    from dice_lsp.complete import complete_at
    from dice_lsp.completion.sources.workspace import WorkspaceIndex
    from dice_lsp.engine import EMBEDDED_MODEL, load_model
    from dice_lsp.settings import Settings
    from dice_lsp.textdoc import Position

    head = "__global__ void scale(float* out, const float* in, float s, int n) {\n"
    tail = "    if (i < n) out[i] = s * in[i];\n}\n"
    index = WorkspaceIndex()
    index.add("/w/shift.cu", head.replace("scale", "shift") + "    int i = blockDim.x * blockIdx.x + threadIdx.x;\n"
              + tail.replace("s * in[i]", "s + in[i]"))
    text = head + "    \n" + tail
    model = load_model(EMBEDDED_MODEL, device="cpu")
    done = complete_at(model, text, Position(1, 4), Settings(min_confidence=0.0),
                       sources=(index.source(exclude="/w/scale.cu"),))
    assert done.texts and done.sources is not None
    assert done.texts[0] == "int i = blockDim.x * blockIdx.x + threadIdx.x;" and done.sources[0] == "workspace"
    assert not any(key(t) == key(TEXTBOOK) for t in done.texts[1:])  # the textbook order is not a second item
