"""Where the model runs: CUDA in bf16 when there is a GPU, else the CPU; both overridable. On an x86-64 CPU the
embedded transformer's linear layers run as int8 products (`quant.Int8Linear`: ~1.4x bf16's speed per fill
where the processor computes bf16 natively, ~2x fp32's elsewhere, with the same fill quality on the dev split:
docs/PERFORMANCE.md); on other CPUs in bf16 where the processor computes it natively and fp32 elsewhere. On
the CPU, with half the cores' threads (`cpu_threads`)."""

from __future__ import annotations

import os
import platform
from functools import cache
from pathlib import Path

import torch

from dice_lsp.errors import DiceError

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
INT8 = "int8"  # not a tensor dtype: int8 products for the linear layers, the rest in fp32 (CPU only)


def resolve_device(name: str | None = None) -> torch.device:
    """`None`/`"auto"` picks CUDA when available; an explicit CUDA device that is absent is an error."""
    if name in (None, "", "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError as exc:
        raise DiceError(f"unknown device {name!r} (use auto, cpu, cuda or cuda:N)") from exc
    if device.type == "cuda" and not torch.cuda.is_available():
        raise DiceError(f"device {name!r} requested but no CUDA GPU is available")
    if device.type == "cuda" and (device.index or 0) >= torch.cuda.device_count():
        raise DiceError(f"device {name!r} requested but only {torch.cuda.device_count()} CUDA GPUs are present")
    return device


@cache
def cpu_has_native_bf16(cpuinfo: Path = Path("/proc/cpuinfo")) -> bool:
    """x86 with AVX512-BF16 or AMX, or Arm with the BF16 extension (Linux; elsewhere: assume not)."""
    try:
        words = set(cpuinfo.read_text(errors="replace").split())
    except OSError:
        return False
    return bool(words & {"avx512_bf16", "amx_bf16", "bf16"})


def resolve_dtype(device: torch.device, name: str | None = None) -> torch.dtype:
    """The dtype of the model's tensors (with int8 products, the fp32 of everything but their weights)."""
    if name in (None, "", "auto"):
        if device.type == "cpu" and int8_products(device, name):
            return torch.float32
        native_bf16 = device.type == "cuda" or cpu_has_native_bf16()
        return torch.bfloat16 if native_bf16 else torch.float32
    if name == INT8:
        if device.type != "cpu":
            raise DiceError(f"dtype int8 runs on the CPU only (the model is on {device})")
        return torch.float32
    if name not in DTYPES:
        raise DiceError(f"unknown dtype {name!r} (use auto, {', '.join(DTYPES)} or {INT8})")
    return DTYPES[name]


def int8_products(device: torch.device, name: str | None = None) -> bool:
    """Whether a model on `device` with dtype `name` runs its linear layers as int8 products: asked (`int8`),
    or with no dtype asked on an x86-64 CPU (oneDNN's int8 products: measured faster than bf16 and fp32 there;
    other CPUs are not measured)."""
    if device.type != "cpu":
        return False
    return name == INT8 or (name in (None, "", "auto") and platform.machine().lower() in ("x86_64", "amd64"))


def cpu_threads(cores: int | None = None) -> int:
    """Intra-op threads for a model on the CPU: half the logical cores (one per physical core where each has
    two), at most 8.

    Every torch op of a denoising step waits at a barrier for all its threads, and a thread the OS has
    descheduled for another busy process (the editor, clang, nvcc, a build) holds up each of those barriers.
    With dice-tiny on 2 cores (`bench/cpu_contention.py`, docs/PERFORMANCE.md): one thread 0.20 s per fill
    on an idle machine, 0.20 s with one other busy process, 0.33 s with two; two threads 0.14 s idle but
    2.6-3.2 s with one busy process (0.22-0.26 s while they wait sleeping, `dice_lsp/__init__.py`).
    """
    return max(1, min(8, (cores if cores is not None else os.cpu_count() or 2) // 2))


def use_cpu_threads() -> None:
    """Set torch's intra-op threads to `cpu_threads()`, unless the user chose them (OMP_NUM_THREADS)."""
    if not os.environ.get("OMP_NUM_THREADS"):
        torch.set_num_threads(cpu_threads())
