"""The kernel-level launch spec: how a .cu file says how to run its kernel."""

from __future__ import annotations

import pytest

from dice_lsp.errors import DiceError
from dice_lsp.harness.spec import evaluate, find_specs, parse_spec

SPEC = """
kernel = "rows"
sizes = { rows = 4096, cols = 1000 }
grid = ["rows"]
block = [256]
shared_bytes = "256 * 4"
align = { cols = 8 }
args = [
  { name = "out", role = "out", dtype = "float32", shape = ["rows"] },
  { name = "x", role = "in", dtype = "float16", shape = ["rows", "cols"] },
  { name = "cols", role = "scalar", dtype = "int32", value = "cols" },
]
"""


def test_expressions_are_arithmetic_over_sizes_only() -> None:
    assert evaluate("cdiv(n, 256) * 2 + max(1, n % 7)", {"n": 1000}) == 8 + max(1, 1000 % 7)
    assert evaluate(12, {}) == 12
    for bad in ("__import__('os')", "n.bit_length()", "m + 1", "[n]"):
        with pytest.raises(DiceError, match="launch spec"):
            evaluate(bad, {"n": 4})


def test_a_spec_gives_launches_bytes_and_check_sizes() -> None:
    spec = parse_spec(SPEC)
    assert spec.launch(spec.sizes) == ((4096, 1, 1), (256, 1, 1), 1024)
    assert spec.bytes_moved(spec.sizes) == 4096 * 4 + 4096 * 1000 * 2
    timed, check = spec.verification_sizes()
    assert timed == {"rows": 4096, "cols": 1000}
    assert check == {"rows": 2049, "cols": 504}, "halved plus one, rounded up to the alignment"


def test_every_block_of_a_file_is_found() -> None:
    source = f"/* dice:launch\n{SPEC}*/\n__global__ void rows() {{}}\n/* plain comment */\n" \
             f"/* dice:launch\n{SPEC.replace('rows', 'other', 1)}*/\n"
    assert [spec.kernel for spec, _ in find_specs(source)] == ["rows", "other"]
    assert find_specs("__global__ void k() {}") == []


@pytest.mark.parametrize(("change", "message"), [
    ('kernel = "rows"', "missing 'kernel'"),
    ('role = "in"', "role must be one of"),
    ('dtype = "float16"', "dtype must be one of"),
    (', value = "cols"', "needs a value"),
    ('grid = ["rows"]', "missing 'grid'"),
    (', shape = ["rows"]', "needs a shape"),
])
def test_a_broken_spec_says_what_is_wrong(change: str, message: str) -> None:
    replacement = {'role = "in"': 'role = "input"', 'dtype = "float16"': 'dtype = "half"'}.get(change, "")
    with pytest.raises(DiceError, match=message):
        parse_spec(SPEC.replace(change, replacement, 1))


def test_a_size_that_empties_a_tensor_fails_early() -> None:
    with pytest.raises(DiceError, match="empty"):
        parse_spec(SPEC.replace("rows = 4096", "rows = 0"))
