"""Inputs that expose wrong kernels, outputs that expose unwritten ones, and the comparison.

Runs in the harness's child process (torch on the GPU). The rules come from kernels that fooled earlier
benchmarks: fresh random inputs per trial in several distributions (never zeros), outputs poisoned
before each run (NaN, or a bit pattern for integers), canary bytes around every tensor that a write
past either end disturbs, inputs compared with their copies after the run, the reference computed first
and kept alive, NaN or Inf passing only where the reference has them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from dice_lsp.errors import DiceError

TORCH_DTYPES = {"float32": torch.float32, "float64": torch.float64, "float16": torch.float16,
                "bfloat16": torch.bfloat16, "int8": torch.int8, "uint8": torch.uint8, "int32": torch.int32,
                "uint32": torch.uint32, "int64": torch.int64}
TOLERANCE = {torch.float64: 1e-6, torch.float32: 1e-3, torch.float16: 1e-2, torch.bfloat16: 2e-2}
INT_POISON = 0x5A


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
    if tensor.dtype.is_floating_point:
        return tensor.fill_(float("nan"))
    return tensor.view(torch.uint8).fill_(INT_POISON).view(tensor.dtype) if tensor.numel() else tensor


class Guarded:
    """A flat tensor with canary bytes on both sides, to catch writes out of its bounds."""

    def __init__(self, numel: int, dtype: torch.dtype, generator: torch.Generator) -> None:
        self.numel = numel
        self.pad = max(16384, numel // 8)
        self.storage = torch.empty(numel + 2 * self.pad, dtype=dtype, device="cuda")
        self.tensor = self.storage[self.pad:self.pad + numel]
        self.canaries = [torch.randint(0, 256, (self.pad * self.storage.element_size(),), generator=generator,
                                       device="cuda", dtype=torch.uint8) for _ in range(2)]
        for side, canary in zip(self._sides(), self.canaries, strict=True):
            side.copy_(canary)

    def _sides(self) -> tuple[torch.Tensor, torch.Tensor]:
        raw = self.storage.view(torch.uint8)
        size = self.storage.element_size()
        return raw[:self.pad * size], raw[(self.pad + self.numel) * size:]

    def canaries_intact(self) -> bool:
        return all(torch.equal(side, canary) for side, canary in zip(self._sides(), self.canaries, strict=True))


@dataclass
class Comparison:
    ok: bool
    max_abs_err: float
    max_rel_err: float
    mismatched: int
    detail: str = ""


def compare(name: str, got: torch.Tensor, want: torch.Tensor) -> Comparison:
    """Elementwise within tolerance of the dtype (integers exactly); the absolute part scales with the
    reference's root mean square, so sums of many large values are judged like small ones."""
    if got.shape != want.shape or got.dtype != want.dtype:
        return Comparison(False, float("inf"), float("inf"), got.numel(),
                          f"{name}: {tuple(got.shape)} {got.dtype} where the reference has "
                          f"{tuple(want.shape)} {want.dtype}")
    if not want.dtype.is_floating_point:
        wrong = got != want
        diff = (got.to(torch.float64) - want.to(torch.float64)).abs()
        count = int(wrong.sum())
        return Comparison(count == 0, float(diff.max()) if diff.numel() else 0.0, float(count > 0), count,
                          f"{name}: {count} of {got.numel()} elements differ from the reference" if count else "")
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
    detail = (f"{name}: {count} of {got.numel()} elements differ from the reference (max abs err {max_abs:.3g}, "
              f"tolerance {tol:g} relative)") if count else ""
    return Comparison(count == 0, max_abs, max_rel, count, detail)


def record(errors: dict[str, float], comparison: Comparison) -> None:
    """Keep the largest errors seen over all trials and outputs."""
    errors["max_abs_err"] = max(errors["max_abs_err"], comparison.max_abs_err)
    errors["max_rel_err"] = max(errors["max_rel_err"], comparison.max_rel_err)


def fail(message: str, **context: Any) -> DiceError:
    where = ", ".join(f"{k}={v}" for k, v in context.items())
    return DiceError(f"{message} ({where})" if where else message)
