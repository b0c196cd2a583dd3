"""Where the model runs: CUDA in bf16 when there is a GPU, else the CPU in fp32; both overridable."""

from __future__ import annotations

import torch

from dice_lsp.errors import DiceError

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


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


def resolve_dtype(device: torch.device, name: str | None = None) -> torch.dtype:
    if name in (None, "", "auto"):
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    if name not in DTYPES:
        raise DiceError(f"unknown dtype {name!r} (use {', '.join(DTYPES)})")
    return DTYPES[name]
