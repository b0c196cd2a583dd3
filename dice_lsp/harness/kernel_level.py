"""Verify and time one kernel from a cubin against a reference kernel, as the launch spec says to run it.

The child-process job (`run`) of the kernel-level path: torch owns the context, memory and streams; the
kernels are launched through the driver on torch's current stream. Verification runs first (every
verification size, several trials, fresh inputs each), timing only for a kernel that passed. Every tensor
the harness hands a kernel lies in the middle of a larger buffer with canary bytes at both ends
(`verify.Guarded`). With `check_only` in the payload the job stops after verification (the pass that
runs under compute-sanitizer).
"""

from __future__ import annotations

import ctypes
from pathlib import Path
from typing import Any

import torch

from dice_lsp.errors import DiceError
from dice_lsp.harness.cuda_driver import Driver
from dice_lsp.harness.limits import Limits
from dice_lsp.harness.spec import Arg, LaunchSpec, evaluate, parse_spec
from dice_lsp.harness.timing import Timer, copy_bandwidth, floor_ms
from dice_lsp.harness.verify import TORCH_DTYPES, Guarded, compare, fail, never_written, poison_, random_tensor, record

SCALARS: dict[str, Any] = {"float32": ctypes.c_float, "float64": ctypes.c_double, "int32": ctypes.c_int32,
           "uint32": ctypes.c_uint32, "int64": ctypes.c_int64, "int8": ctypes.c_int8, "uint8": ctypes.c_uint8}
MAX_INPUT_SETS = 4


class Kernel:
    def __init__(self, driver: Driver, spec: LaunchSpec, cubin: str, symbol: str, spec_text: str | None = None) -> None:
        """`spec_text`: the kernel's own launch spec, when it launches differently from `spec` (same arguments
        by name, at the same sizes)."""
        self.driver, self.spec = driver, parse_spec(spec_text) if spec_text else spec
        self.function = driver.function(Path(cubin), symbol)

    def launch(self, tensors: dict[str, torch.Tensor], sizes: dict[str, int]) -> None:
        grid, block, shared = self.spec.launch(sizes)
        values = [_argument(arg, tensors, sizes) for arg in self.spec.args]
        self.driver.launch(self.function, grid, block, shared, torch.cuda.current_stream().cuda_stream, values)


def _argument(arg: Arg, tensors: dict[str, torch.Tensor], sizes: dict[str, int]) -> ctypes._SimpleCData:  # type: ignore[type-arg]
    if arg.role != "scalar":
        return ctypes.c_void_p(tensors[arg.name].data_ptr())
    if arg.dtype not in SCALARS:
        raise fail(f"scalar {arg.name!r}: dtype {arg.dtype} cannot be passed by value here")
    value = evaluate(arg.value if arg.value is not None else 0, sizes)
    return SCALARS[arg.dtype](value if arg.dtype.startswith("float") else int(value))  # type: ignore[no-any-return]


def run(payload: dict[str, Any]) -> dict[str, Any]:
    """Payload: spec (TOML text), candidate {cubin, symbol}, reference {cubin, symbol, spec?} or None, trials,
    seed, check_only."""
    spec = parse_spec(payload["spec"])
    torch.empty(1, device="cuda")  # makes torch's context current for the driver calls
    driver = Driver()
    candidate = Kernel(driver, spec, **payload["candidate"])
    ref = payload.get("reference")
    reference = Kernel(driver, spec, ref["cubin"], ref["symbol"], ref.get("spec")) if ref else None
    generator = torch.Generator(device="cuda").manual_seed(int(payload.get("seed", 0)))
    errors = verify(driver, spec, candidate, reference, generator, int(payload.get("trials", Limits.trials)))
    shapes = [_shape_text(sizes) for sizes in spec.verification_sizes()]
    result: dict[str, Any] = {"verified": reference is not None, **errors, "flags": [], "shapes": shapes}
    if payload.get("check_only"):
        return result
    timer = Timer()
    cand_timing = timer.time(rotating(candidate, spec, generator))
    result["candidate"] = vars(cand_timing)
    if reference is not None:
        ref_timing = timer.time(rotating(reference, spec, generator))
        result["reference"] = vars(ref_timing)
        result["speedup"] = ref_timing.median_ms / cand_timing.median_ms
    bandwidth = copy_bandwidth()
    floor = floor_ms(spec.bytes_moved(spec.sizes), bandwidth)
    result.update(bandwidth_gbs=bandwidth / 1e9, floor_ms=floor)
    if cand_timing.median_ms < floor:
        result["flags"].append(f"faster than memory allows: {cand_timing.median_ms:.4f} ms for "
                               f"{spec.bytes_moved(spec.sizes) / 1e6:.0f} MB (floor {floor:.4f} ms)")
    return result


def verify(driver: Driver, spec: LaunchSpec, candidate: Kernel, reference: Kernel | None,
           generator: torch.Generator, trials: int) -> dict[str, float]:
    """Check `candidate` at every verification size, `trials` times each with fresh inputs, against
    `reference` (without one: only that it writes its outputs); a DiceError says where it first failed.
    Returns the largest errors seen."""
    errors = {"max_abs_err": 0.0, "max_rel_err": 0.0}
    for sizes in spec.verification_sizes():
        for trial in range(trials):
            _check_once(driver, spec, candidate, reference, sizes, trial, generator, errors)
    return errors


def _check_once(driver: Driver, spec: LaunchSpec, candidate: Kernel, reference: Kernel | None,
                sizes: dict[str, int], trial: int, generator: torch.Generator, errors: dict[str, float]) -> None:
    tensor_args = [a for a in spec.args if a.role != "scalar"]
    inputs = {a.name: random_tensor((a.numel(sizes),), TORCH_DTYPES[a.dtype], trial, generator)
              for a in tensor_args if a.role in ("in", "inout")}

    def run_kernel(kernel: Kernel, who: str) -> dict[str, Guarded]:
        buffers = {a.name: Guarded(a.numel(sizes), TORCH_DTYPES[a.dtype], generator) for a in tensor_args}
        for a in tensor_args:
            if a.role == "out":
                poison_(buffers[a.name].tensor)
            else:
                buffers[a.name].tensor.copy_(inputs[a.name])
        try:
            kernel.launch({name: b.tensor for name, b in buffers.items()}, sizes)
            driver.synchronize()
        except DiceError as exc:
            raise fail(f"{who} failed: {exc}", sizes=sizes, trial=trial) from exc
        for a in tensor_args:
            if side := buffers[a.name].broken_side():
                raise fail(f"{who} writes out of the bounds of {a.name!r} (into the guard region {side} it)",
                           sizes=sizes, trial=trial)
            if a.role == "in" and not torch.equal(buffers[a.name].tensor, inputs[a.name]):
                raise fail(f"{who} modifies its input {a.name!r}", sizes=sizes, trial=trial)
        return buffers

    want = run_kernel(reference, "the reference") if reference is not None else None  # first, kept alive
    got = run_kernel(candidate, "the kernel")
    for a in tensor_args:
        if a.role == "in":
            continue
        if want is None:
            if a.role == "out" and bool(never_written(got[a.name].tensor).all()):
                raise fail(f"{a.name}: output never written (it still holds the harness's poison)", sizes=sizes,
                           trial=trial)
            continue
        comparison = compare(a.name, got[a.name].tensor, want[a.name].tensor)
        record(errors, comparison)
        if not comparison.ok:
            raise fail(comparison.detail, sizes=sizes, trial=trial)


def _shape_text(sizes: dict[str, int]) -> str:
    return ", ".join(f"{name}={value}" for name, value in sizes.items())


def rotating(kernel: Kernel, spec: LaunchSpec, generator: torch.Generator) -> Any:
    """A launch function over several input sets at the timed sizes (as many as fit in 2 GB, up to 4)."""
    sizes = spec.sizes
    per_set = max(1, sum(a.nbytes(sizes) for a in spec.args if a.role != "scalar"))
    count = max(1, min(MAX_INPUT_SETS, (2 << 30) // per_set))
    sets = []
    for index in range(count):
        tensors = {}
        for a in spec.args:
            if a.role == "scalar":
                continue
            tensor = random_tensor((a.numel(sizes),), TORCH_DTYPES[a.dtype], index, generator)
            tensors[a.name] = poison_(tensor) if a.role == "out" else tensor
        sets.append(tensors)

    def launch(i: int) -> None:
        kernel.launch(sets[i % count], sizes)

    return launch
