"""The harness's checks that need no GPU: guard regions on byte buffers, how a failed comparison is named,
the second shape of a KernelBench reference, and how a child's answer becomes a result."""

from __future__ import annotations

import ast
import math
import types
from pathlib import Path

import pytest
import torch

from dice_lsp.harness.allocator_guard import changed_bytes, must_hold_poison, subtract
from dice_lsp.harness.bench import KernelResult, _result, memcheck_verdict
from dice_lsp.harness.extension import second_shape_inputs, shapes_text, vary_sizes
from dice_lsp.harness.isolate import Outcome
from dice_lsp.harness.verify import POISON_BYTE, Guarded, compare, guarded_copy, never_written, poison_
from dice_lsp.lsp.bench_lenses import bench_title


def generator() -> torch.Generator:
    return torch.Generator().manual_seed(0)


@pytest.mark.parametrize(("offset", "side"), [(-1, "before"), (-4096, "before"), (0, "after"), (16383, "after")])
def test_a_write_past_either_end_of_a_guarded_tensor_breaks_that_side(offset: int, side: str) -> None:
    guarded = Guarded((64, 33), torch.float32, generator())
    assert guarded.tensor.shape == (64, 33) and guarded.tensor.is_contiguous()
    assert guarded.tensor.data_ptr() % 16 == guarded.raw.data_ptr() % 16  # vector loads stay aligned
    guarded.tensor.fill_(3.0)  # the tensor itself is the kernel's to write
    assert guarded.broken_side() is None and guarded.canaries_intact()
    position = guarded.pad + offset if offset < 0 else guarded.pad + guarded.nbytes + offset
    guarded.raw[position] ^= 0x01
    assert guarded.broken_side() == side and not guarded.canaries_intact()


def test_the_guard_region_is_at_least_64_kib_or_an_eighth() -> None:
    assert Guarded(10, torch.float16, generator()).pad == 64 << 10
    big = Guarded(1 << 20, torch.float32, generator())
    assert big.pad == (4 << 20) // 8 and big.raw.numel() == (4 << 20) + 2 * big.pad


def test_a_guarded_copy_holds_the_values() -> None:
    source = torch.arange(12, dtype=torch.int32).reshape(3, 4)
    copy = guarded_copy(source, generator())
    assert torch.equal(copy.tensor, source) and copy.broken_side() is None


def test_poison_is_every_byte_0xff_and_is_recognised() -> None:
    for dtype in (torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int32, torch.uint8):
        tensor = poison_(torch.zeros(5, dtype=dtype))
        assert bool((tensor.view(torch.uint8) == POISON_BYTE).all()) and bool(never_written(tensor).all())
    computed_nan = torch.tensor([float("nan"), 1.0])  # a NaN that arithmetic made is not the poison
    assert never_written(computed_nan).tolist() == [False, False]


def test_an_output_never_written_is_named_so() -> None:
    want = torch.randn(4, 8)
    comparison = compare("output 0", poison_(torch.empty(4, 8)), want)
    assert not comparison.ok
    assert comparison.detail == "output 0: output never written (all 32 elements still hold the harness's poison)"
    partly = want.clone()
    poison_(partly[1])
    assert compare("y", partly, want).detail == "y: 8 of 32 elements never written (still the harness's poison)"


def test_non_finite_values_where_the_reference_is_finite_are_named_so() -> None:
    want = torch.ones(10)
    got = want.clone()
    got[0], got[1], got[2] = float("nan"), float("inf"), float("-inf")
    comparison = compare("output 0", got, want)
    assert not comparison.ok and comparison.max_abs_err == math.inf
    assert comparison.detail == "output 0: non-finite values (1 NaN, 2 inf) where the reference is finite"


def test_other_differences_keep_the_general_message() -> None:
    want = torch.ones(10)
    got = want.clone()
    got[3] = 2.0
    assert compare("y", got, want).detail == ("y: 1 of 10 elements differ from the reference (max abs err 1, "
                                              "tolerance 0.001 relative)")
    ints = compare("hist", torch.tensor([1, 2, 4]), torch.tensor([1, 2, 3]))
    assert ints.detail == "hist: 1 of 3 elements differ from the reference"
    assert compare("y", want.clone(), want).ok


def test_intervals_that_must_still_hold_poison() -> None:
    assert subtract([(0, 100)], [(10, 20), (50, 60)]) == [(0, 10), (20, 50), (60, 100)]
    assert subtract([(0, 10)], [(0, 10)]) == []
    # window after an output at 1000: free before the call from 900 to 1500, a temporary at 1100-1200
    assert must_hold_poison((1000, 1400), [(900, 1500), (5000, 6000)], [(1100, 1200)]) == [(1000, 1100),
                                                                                          (1200, 1400)]
    assert must_hold_poison((1000, 1400), [(0, 500)], []) == []  # live memory: its own canaries guard it
    assert changed_bytes(bytes([POISON_BYTE]) * 8) == 0 and changed_bytes(b"\xff\x00\xff\x01") == 2


REFERENCE = '''
import torch
batch = 64
def get_inputs():
    return [torch.randn(batch, 4096), torch.randint(0, 10, (32, 7)), torch.zeros(size=(9,)), 1, True]
'''


def reference_module(tmp_path: Path, source: str) -> types.ModuleType:
    path = tmp_path / "reference.py"
    path.write_text(source)
    module = types.ModuleType("reference")
    module.__file__ = str(path)
    exec(compile(source, str(path), "exec"), vars(module))
    return module


def test_literal_sizes_and_size_globals_are_varied_for_the_second_shape(tmp_path: Path) -> None:
    module = reference_module(tmp_path, REFERENCE)
    get_inputs = second_shape_inputs(module, REFERENCE, leading_only=False)
    assert get_inputs is not None
    x, labels, zeros, one, flag = get_inputs()
    assert x.shape == (33, 2049) and labels.shape == (17, 4) and zeros.shape == (5,)
    assert int(labels.max()) < 10 and one == 1 and flag is True  # low/high and plain values are not sizes
    assert module.batch == 64 and module.get_inputs()[0].shape == (64, 4096)  # the module itself is untouched


def test_only_the_leading_size_when_asked(tmp_path: Path) -> None:
    module = reference_module(tmp_path, REFERENCE)
    get_inputs = second_shape_inputs(module, REFERENCE, leading_only=True)
    assert get_inputs is not None
    assert [tuple(t.shape) for t in get_inputs()[:3]] == [(33, 4096), (17, 7), (5,)]


def test_a_reference_with_nothing_to_vary_has_one_shape(tmp_path: Path) -> None:
    source = "import torch\ndef get_inputs():\n    return [torch.randn(1, 1)]\n"
    assert second_shape_inputs(reference_module(tmp_path, source), source, leading_only=False) is None


def test_vary_sizes_counts_what_it_rewrote() -> None:
    function = ast.parse("def get_inputs():\n    return [torch.rand((8, 3)), torch.full((6,), 7)]\n").body[0]
    assert isinstance(function, ast.FunctionDef)
    assert vary_sizes(function, {}, leading_only=False) == 3
    assert "torch.rand((5, 2))" in ast.unparse(function) and "torch.full((4,), 7)" in ast.unparse(function)
    assert shapes_text([torch.zeros(2, 3), 5, torch.zeros(4)]) == "(2, 3), (4,)"


def answer(**changes: object) -> dict[str, object]:
    value: dict[str, object] = {"verified": True, "max_abs_err": 0.0, "max_rel_err": 0.0, "flags": [],
                                "shapes": ["(4096, 8192)", "(2049, 4097)"], "speedup": 51.9,
                                "candidate": {"median_ms": 0.01, "spread_pct": 1.0}, "reference": {"median_ms": 0.5}}
    value.update(changes)
    return value


def test_a_flagged_kernel_is_rejected_with_its_reason_and_no_speedup() -> None:
    """The side-stream case: right values, timed at 51.9x, flagged from its source."""
    flag = "creates streams (cudaStreamCreate): its work may escape the timed stream"
    flagged = _result(KernelResult("forward", flags=[flag]), answer(), None, True)
    assert not flagged.verified and flagged.speedup_vs_ref is None
    assert flagged.failure == f"rejected: {flag}"
    timed_flag = "faster than memory allows: 0.0100 ms for 268 MB (floor 0.0600 ms)"
    too_fast = _result(KernelResult("forward"), answer(flags=[timed_flag]), None, True)
    assert not too_fast.verified and too_fast.speedup_vs_ref is None and too_fast.failure == f"rejected: {timed_flag}"


def test_a_verified_kernel_keeps_its_speedup_and_shapes() -> None:
    result = _result(KernelResult("forward"), answer(), None, True)
    assert result.verified and result.speedup_vs_ref == 51.9 and result.failure is None
    assert result.shapes == ["(4096, 8192)", "(2049, 4097)"]
    assert bench_title(result) == "0.010 ms ±1% · 51.90× vs ref · verified"
    one = _result(KernelResult("forward"), answer(shapes=["(64, 64)"]), None, True)
    assert bench_title(one).endswith("· verified at one shape only")
    refusal = "refuses shape (1025, 8193): cols must be a multiple of 4"
    limited = _result(KernelResult("forward"), answer(limitations=[refusal]), None, True)
    assert bench_title(limited) == ("0.010 ms ±1% · 51.90× vs ref · verified · "
                                    "limited: refuses shape (1025, 8193): cols must be a multiple of 4")


def test_without_a_reference_there_is_no_speedup() -> None:
    result = _result(KernelResult("k"), answer(), None, False)
    assert not result.verified and result.speedup_vs_ref is None and "no reference" in (result.failure or "")


def test_memcheck_verdicts() -> None:
    found = Outcome(None, "the child process exited with code 86: x", "========= Invalid __global__ write of size 4 "
                    "bytes\n=========     at relu_scale_kernel\n========= ERROR SUMMARY: 1296 errors\n")
    assert memcheck_verdict(found) == ("1296 errors", "compute-sanitizer memcheck found 1296 errors: Invalid "
                                       "__global__ write of size 4 bytes")
    clean = Outcome({"verified": True}, None, "========= ERROR SUMMARY: 0 errors\n")
    assert memcheck_verdict(clean) == ("passed", None)
    late = Outcome(None, "timed out after 60 s (killed)", "")
    assert memcheck_verdict(late) == ("did not finish: timed out after 60 s (killed)", None)
    guarded = Outcome(None, "the kernel writes out of the bounds of its input 0 (into the guard region before it)", "")
    assert memcheck_verdict(guarded) == ("failed the checks", guarded.failure)
