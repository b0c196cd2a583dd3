"""The few CUDA driver calls that load a cubin and launch a kernel, through ctypes on libcuda.

libcuda comes with every NVIDIA driver, so kernel-level benchmarks need no package beyond torch (which
owns the context, the memory and the streams); every status is checked and turned into a DiceError that
names the call and the driver's error (an illegal address, a launch failure).
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from pathlib import Path

from dice_lsp.errors import DiceError

CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
DEFAULT_DYNAMIC_SHARED = 48 * 1024  # more than this needs an opt-in per kernel


class Driver:
    def __init__(self) -> None:
        try:
            self.lib = ctypes.CDLL("libcuda.so.1")
        except OSError as exc:
            raise DiceError(f"the CUDA driver (libcuda.so.1) cannot be loaded: {exc}") from exc
        self.modules: list[ctypes.c_void_p] = []

    def check(self, status: int, call: str) -> None:
        if status == 0:
            return
        name = ctypes.c_char_p()
        self.lib.cuGetErrorName(status, ctypes.byref(name))
        text = name.value.decode() if name.value else f"error {status}"
        raise DiceError(f"{call} failed: {text}")

    def function(self, cubin: Path, symbol: str) -> ctypes.c_void_p:
        """The kernel `symbol` of `cubin`, loaded into the current (torch's) context."""
        module = ctypes.c_void_p()
        image = cubin.read_bytes()
        self.check(self.lib.cuModuleLoadData(ctypes.byref(module), ctypes.c_char_p(image)), "cuModuleLoadData")
        self.modules.append(module)
        function = ctypes.c_void_p()
        self.check(self.lib.cuModuleGetFunction(ctypes.byref(function), module, symbol.encode()),
                   f"cuModuleGetFunction({symbol})")
        return function

    def launch(self, function: ctypes.c_void_p, grid: tuple[int, int, int], block: tuple[int, int, int],
               shared: int, stream: int, args: Sequence[ctypes._SimpleCData]) -> None:  # type: ignore[type-arg]
        if shared > DEFAULT_DYNAMIC_SHARED:
            self.check(self.lib.cuFuncSetAttribute(function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                                   ctypes.c_int(shared)), "cuFuncSetAttribute")
        params = (ctypes.c_void_p * len(args))(*(ctypes.cast(ctypes.byref(a), ctypes.c_void_p) for a in args))
        self.check(self.lib.cuLaunchKernel(function, *(ctypes.c_uint(g) for g in grid),
                                           *(ctypes.c_uint(b) for b in block), ctypes.c_uint(shared),
                                           ctypes.c_void_p(stream), params, None), "cuLaunchKernel")

    def synchronize(self) -> None:
        """Wait for the device; a kernel's fault (illegal address, trap) surfaces here."""
        self.check(self.lib.cuCtxSynchronize(), "the kernel")
