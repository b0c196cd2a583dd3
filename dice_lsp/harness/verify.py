"""Inputs that expose wrong kernels, outputs that expose unwritten ones, and the comparison.

Runs in the harness's child process (torch on the GPU). The rules come from kernels that fooled earlier
benchmarks: fresh random inputs per trial in several distributions (never zeros), outputs poisoned
before each run (every byte 0xFF: a NaN no arithmetic produces, -1 for integers), canary bytes around
every tensor that a write past either end disturbs, inputs compared with their copies after the run, the
reference computed first and kept alive, NaN or Inf passing only where the reference has them. A failed
comparison says which failure it is: an output never written (it still holds the poison), non-finite
values where the reference is finite, or values that differ.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from dice_lsp.errors import DiceError

TORCH_DTYPES = {"float32": torch.float32, "float64": torch.float64, "float16": torch.float16,
                "bfloat16": torch.bfloat16, "int8": torch.int8, "uint8": torch.uint8, "int32": torch.int32,
                "uint32": torch.uint32, "int64": torch.int64}
TOLERANCE = {torch.float64: 1e-6, torch.float32: 1e-3, torch.float16: 1e-2, torch.bfloat16: 2e-2}
POISON_BYTE = 0xFF  # every byte of a poisoned output: NaN in every float format, -1 in every integer one
GUARD_MIN_BYTES = 64 << 10  # the canary region on each side of a guarded tensor: at least this, or an eighth


def random_tensor(shape: tuple[int, ...], dtype: torch.dtype, trial: int, generator: torch.Generator) -> torch.Tensor:
    """Trial 0: standard normal; 1: uniform in ±100; 2: mostly tiny values with a few large ones. Integers
    span their type's range on trial 0 and small signed values after."""
    device = "cuda"
    if dtype.is_floating_point:
        if trial % 3 == 0:
            values = torch.randn(shape, generator=generator, device=device)
        elif trial % 3 == 1:
            values = torch.rand(shape, generator=generator, device=device) * 200 - 100
        else:
            values = torch.randn(shape, generator=generator, device=device) * 1e-3
            values += (torch.rand(shape, generator=generator, device=device) < 0.01) * 50.0
        return values.to(dtype)
    info = torch.iinfo(dtype)
    low, high = (info.min, info.max) if trial % 2 == 0 else (max(info.min, -1000), min(info.max, 1000))
    return torch.randint(low, high, shape, generator=generator, device=device, dtype=torch.int64).to(dtype)


def poison_(tensor: torch.Tensor) -> torch.Tensor:
    """Fill a contiguous tensor's bytes with POISON_BYTE (a fresh kernel output before its run)."""
    if tensor.numel():
        tensor.view(torch.uint8).fill_(POISON_BYTE)
    return tensor


def never_written(got: torch.Tensor) -> torch.Tensor:
    """Per element: whether all its bytes still hold POISON_BYTE (the kernel did not write it)."""
    flat = got.detach().contiguous().reshape(-1)
    if not flat.numel():
        return torch.zeros(0, dtype=torch.bool, device=got.device)
    return (flat.view(torch.uint8).reshape(flat.numel(), flat.element_size()) == POISON_BYTE).all(dim=1)


def guard_bytes(nbytes: int) -> int:
    """The canary region on each side of a tensor of `nbytes`: at least 64 KiB, or an eighth of the tensor."""
    return max(GUARD_MIN_BYTES, nbytes // 8)


class Guarded:
    """A contiguous tensor in the middle of a larger buffer whose two ends hold random canary bytes, to
    catch writes out of its bounds: the kernel is handed `tensor`, and `broken_side` compares the ends."""

    def __init__(self, shape: int | tuple[int, ...], dtype: torch.dtype, generator: torch.Generator) -> None:
        self.shape = (shape,) if isinstance(shape, int) else tuple(shape)
        itemsize = torch.empty(0, dtype=dtype).element_size()
        self.nbytes = math.prod(self.shape) * itemsize
        self.pad = -(-guard_bytes(self.nbytes) // 16) * 16  # keeps the tensor 16-byte aligned for vector loads
        self.raw = torch.empty(self.nbytes + 2 * self.pad, dtype=torch.uint8, device=generator.device)
        self.tensor = self.raw[self.pad:self.pad + self.nbytes].view(dtype).view(self.shape)
        self.canaries = [torch.randint(0, 256, (self.pad,), generator=generator, device=generator.device,
                                       dtype=torch.uint8) for _ in range(2)]
        for side, canary in zip(self._sides(), self.canaries, strict=True):
            side.copy_(canary)

    def _sides(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self.raw[:self.pad], self.raw[self.pad + self.nbytes:]

    def broken_side(self) -> str | None:
        """"before" or "after" when a canary region changed (the first that did), else None."""
        for name, side, canary in zip(("before", "after"), self._sides(), self.canaries, strict=True):
            if not torch.equal(side, canary):
                return name
        return None

    def canaries_intact(self) -> bool:
        return self.broken_side() is None


def guarded_copy(tensor: torch.Tensor, generator: torch.Generator) -> Guarded:
    """A guarded, contiguous copy of `tensor` (an input handed to a kernel, a reference output kept)."""
    guarded = Guarded(tuple(tensor.shape), tensor.dtype, generator)
    guarded.tensor.copy_(tensor)
    return guarded


@dataclass
class Comparison:
    ok: bool
    max_abs_err: float
    max_rel_err: float
    mismatched: int
    detail: str = ""


def compare(name: str, got: torch.Tensor, want: torch.Tensor) -> Comparison:
    """Elementwise within tolerance of the dtype (integers exactly); the absolute part scales with the
    reference's root mean square, so sums of many large values are judged like small ones. The detail
    names the failure: elements never written, non-finite values where the reference is finite, or
    values that differ."""
    if got.shape != want.shape or got.dtype != want.dtype:
        return Comparison(False, float("inf"), float("inf"), got.numel(),
                          f"{name}: {tuple(got.shape)} {got.dtype} where the reference has "
                          f"{tuple(want.shape)} {want.dtype}")
    if not want.dtype.is_floating_point:
        wrong = got != want
        diff = (got.to(torch.float64) - want.to(torch.float64)).abs()
        count = int(wrong.sum())
        unwritten = int((never_written(got).reshape(got.shape) & wrong).sum()) if count else 0
        return Comparison(count == 0, float(diff.max()) if diff.numel() else 0.0, float(count > 0), count,
                          _detail(name, got.numel(), count, unwritten, 0, 0, "") if count else "")
    g, w = got.to(torch.float64), want.to(torch.float64)
    finite = torch.isfinite(w)
    special_ok = torch.where(finite, torch.isfinite(g), (g == w) | (torch.isnan(g) & torch.isnan(w)))
    tol = TOLERANCE[want.dtype]
    scale = float(w[finite].square().mean().sqrt()) if bool(finite.any()) else 0.0
    diff = torch.where(finite & torch.isfinite(g), (g - w).abs(), torch.zeros_like(g))
    bad = ~special_ok | (diff > tol * scale + tol * w.abs())
    count = int(bad.sum())
    max_abs = float(diff.max()) if diff.numel() else 0.0
    max_rel = float((diff / w.abs().clamp_min(1e-12)).max()) if diff.numel() else 0.0
    if count and not bool(special_ok.all()):
        max_abs = max_rel = float("inf")
    if not count:
        return Comparison(True, max_abs, max_rel, 0)
    unwritten_mask = never_written(got).reshape(got.shape) & bad
    written_bad = finite & ~unwritten_mask
    nans, infs = int((torch.isnan(g) & written_bad).sum()), int((torch.isinf(g) & written_bad).sum())
    tolerance = f"max abs err {max_abs:.3g}, tolerance {tol:g} relative"
    return Comparison(False, max_abs, max_rel, count,
                      _detail(name, got.numel(), count, int(unwritten_mask.sum()), nans, infs, tolerance))


def _detail(name: str, total: int, bad: int, unwritten: int, nans: int, infs: int, tolerance: str) -> str:
    """One line for a failed comparison, naming its commonest cause first."""
    if unwritten == total:
        return f"{name}: output never written (all {total} elements still hold the harness's poison)"
    if unwritten:
        return f"{name}: {unwritten} of {total} elements never written (still the harness's poison)"
    if nans or infs:
        return f"{name}: non-finite values ({nans} NaN, {infs} inf) where the reference is finite"
    suffix = f" ({tolerance})" if tolerance else ""
    return f"{name}: {bad} of {total} elements differ from the reference{suffix}"


def record(errors: dict[str, float], comparison: Comparison) -> None:
    """Keep the largest errors seen over all trials and outputs."""
    errors["max_abs_err"] = max(errors["max_abs_err"], comparison.max_abs_err)
    errors["max_rel_err"] = max(errors["max_rel_err"], comparison.max_rel_err)


def fail(message: str, **context: Any) -> DiceError:
    where = ", ".join(f"{k}={v}" for k, v in context.items())
    return DiceError(f"{message} ({where})" if where else message)
