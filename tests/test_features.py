"""The show filter's features of a candidate at a hole (dice_lsp.completion.features): golden values of the ones
that read the code around the hole."""

from __future__ import annotations

import math

from dice_lsp.completion.features import FEATURES, Evidence, Hole, row

KERNEL_HEAD = "__global__ void k(const float* x, float* y, int n) {\n    "


def features(text: str, before: str, after: str) -> dict[str, float]:
    values = row(Evidence(text, {"model": -0.5}, True, True), Hole(before, after), [-0.5], 1)
    return dict(zip(FEATURES, values, strict=True))


def test_a_declaration_the_rest_of_the_function_uses_or_not() -> None:
    after = "\n    if (i < n) y[i] = x[i] * i;\n}\n\n__global__ void other(int j) {\n    int q = j;\n}\n"
    used = features("int i = blockIdx.x * blockDim.x + threadIdx.x;", KERNEL_HEAD, after)
    assert (used["declares"], used["declared_uses_below"], used["code_below"]) == (1.0, 4.0, 1.0)
    unused = features("int j = blockIdx.y * blockDim.y + threadIdx.y;", KERNEL_HEAD, after)
    assert unused["declared_uses_below"] == 0.0  # `j` of the next function does not count
    statement = features("y[i] = 0;", KERNEL_HEAD, after)
    assert statement["declares"] == 0.0 and math.isnan(statement["declared_uses_below"])
    # written top-down: nothing after the hole in its function yet
    last = features("int i = threadIdx.x;", KERNEL_HEAD, "\n}\n")
    assert (last["declared_uses_below"], last["code_below"]) == (0.0, 0.0)


def test_copies_of_the_line_elsewhere_in_the_function() -> None:
    before = "__global__ void other() {\n    y[i] = 0;\n}\n" + KERNEL_HEAD + "y[i] = 0;\n    z = 1;\n    "
    after = "\n    __syncthreads();\n    y[i]  =  0;\n    y[i] = 0;\n}\n\nvoid later() {\n    y[i] = 0;\n}\n"
    found = features("y[i] = 0;", before, after)
    # the other functions' copies do not count, spacing does not matter
    assert (found["copies_above"], found["copies_below"]) == (1.0, 2.0)
    other = features("y[i] = 1;", before, after)
    assert (other["copies_above"], other["copies_below"]) == (0.0, 0.0)
