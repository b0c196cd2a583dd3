"""Functions that misbehave the ways model-written kernels do, for the isolation tests."""

from __future__ import annotations

import ctypes
import time
from typing import Any

from dice_lsp.errors import DiceError


def echo(payload: dict[str, Any]) -> dict[str, Any]:
    print("kernel printf goes to the log, not the result")
    return {"got": payload}


def hang(payload: dict[str, Any]) -> dict[str, Any]:
    while True:
        time.sleep(1)


def segfault(payload: dict[str, Any]) -> dict[str, Any]:
    ctypes.string_at(0)  # reads address 0: SIGSEGV
    return {}


def hog_memory(payload: dict[str, Any]) -> dict[str, Any]:
    blocks = []
    for _ in range(payload["mib"]):
        blocks.append(bytearray(1 << 20))  # touched pages: resident
    time.sleep(30)
    return {"blocks": len(blocks)}


def wrong_kernel(payload: dict[str, Any]) -> dict[str, Any]:
    raise DiceError("output 'y' differs from the reference: max abs err 3.2")


def raises(payload: dict[str, Any]) -> dict[str, Any]:
    return {"x": 1 // payload["zero"]}
