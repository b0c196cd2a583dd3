"""The KernelBench-compatible path: a reference `Model` in Python, the candidate a torch extension.

The reference file defines `Model`, `get_inputs()` and `get_init_inputs()`; the .cu defines a host function
`forward` bound with `PYBIND11_MODULE(TORCH_EXTENSION_NAME, m)`, called with the inputs followed by the
model's parameters and buffers. Both jobs run in a child process: `build` (a torch extension takes about a
minute to compile) and `run` (verify, then time). Shapes are varied too: the reference module's integer
globals that `get_inputs` reads are halved (plus one) for an extra trial, where the reference accepts it,
so a kernel that hard-codes the shape fails.

`run` imports the module `build` left in the build folder instead of calling torch's `load` again: `load`
rewrites build.ninja and takes a lock file there, and on the team server the run job (the client's
reference and kernel) gets that folder read-only, so that it cannot plant a library for the next request
with the same source.
"""

from __future__ import annotations

import importlib.util
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from dice_lsp.harness.timing import Timer, copy_bandwidth, floor_ms
from dice_lsp.harness.verify import compare, fail, random_tensor, record


def _load_extension(payload: dict[str, Any]) -> Any:
    from torch.utils.cpp_extension import load

    Path(payload["build_dir"]).mkdir(parents=True, exist_ok=True)
    major, minor = torch.cuda.get_device_capability()
    return load(name=payload["name"], sources=[payload["source"]], build_directory=payload["build_dir"],
                extra_include_paths=payload.get("includes", []),
                extra_cuda_cflags=["-O3", f"-gencode=arch=compute_{major}{minor},code=sm_{major}{minor}"],
                verbose=False)


def _load_built(payload: dict[str, Any]) -> Any:
    """The extension module `build` compiled, imported from its build folder without writing there."""
    from torch.utils.cpp_extension import LIB_EXT

    name = payload["name"]
    library = Path(payload["build_dir"]) / f"{name}{LIB_EXT}"
    spec = importlib.util.spec_from_file_location(name, library)
    if spec is None or spec.loader is None or not library.is_file():
        raise fail(f"the extension was not built ({library.name} is missing)")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def build(payload: dict[str, Any]) -> dict[str, Any]:
    """Compile the extension into its build folder (the `run` job then loads it without compiling)."""
    module = _load_extension(payload)
    if not hasattr(module, "forward"):
        raise fail("the extension defines no `forward` (bind it with PYBIND11_MODULE(TORCH_EXTENSION_NAME, m))")
    return {"built": payload["name"]}


def _reference_module(path: str) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location("dice_reference", path)
    if spec is None or spec.loader is None:
        raise fail(f"cannot import the reference {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for name in ("Model", "get_inputs", "get_init_inputs"):
        if not hasattr(module, name):
            raise fail(f"the reference {path} has no {name}")
    return module


def _inputs(reference: types.ModuleType, trial: int, generator: torch.Generator) -> list[Any]:
    """get_inputs() on the GPU; floating-point tensors redrawn from the trial's distribution."""
    values = []
    for value in reference.get_inputs():
        if isinstance(value, torch.Tensor):
            value = value.cuda()
            if value.is_floating_point() and trial > 0:
                value = random_tensor(tuple(value.shape), value.dtype, trial, generator)
        values.append(value)
    return values


def _size_globals(reference: types.ModuleType) -> dict[str, int]:
    names = reference.get_inputs.__code__.co_names
    return {n: getattr(reference, n) for n in names if type(getattr(reference, n, None)) is int}


def run(payload: dict[str, Any]) -> dict[str, Any]:
    """Payload: source, name, build_dir (the extension), reference (path of the .py), trials, seed."""
    torch.manual_seed(int(payload.get("seed", 0)))
    reference = _reference_module(payload["reference"])
    model = reference.Model(*reference.get_init_inputs()).cuda().eval()
    extras = [*model.parameters(), *model.buffers()]
    extension = _load_built(payload)
    generator = torch.Generator(device="cuda").manual_seed(int(payload.get("seed", 0)))
    errors = {"max_abs_err": 0.0, "max_rel_err": 0.0}
    kept: list[Any] = []  # every reference output stays alive: no candidate can be handed its memory
    trials = int(payload.get("trials", 3))
    for trial in range(trials):
        _check_once(model, extension.forward, extras, _inputs(reference, trial, generator), kept, errors,
                    f"trial {trial}")
    sizes = _size_globals(reference)
    varied = {n: v // 2 + 1 for n, v in sizes.items() if v > 1}
    if varied:
        original = dict(sizes)
        vars(reference).update(varied)
        try:
            inputs = _inputs(reference, 0, generator)
            with torch.no_grad():
                kept.append(model(*[x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]))
        except Exception:  # the reference itself does not accept other shapes: no shape trial
            inputs = []
        finally:
            vars(reference).update(original)
        if inputs:
            _check_once(model, extension.forward, extras, inputs, kept, errors, f"sizes {varied}")
    inputs = _inputs(reference, 0, generator)
    timer = Timer()
    with torch.no_grad():
        cand = timer.time(lambda i: extension.forward(*inputs, *extras))
        ref = timer.time(lambda i: model(*inputs))
        output = extension.forward(*inputs, *extras)
    moved = sum(x.numel() * x.element_size() for x in [*inputs, *extras, output] if isinstance(x, torch.Tensor))
    bandwidth = copy_bandwidth()
    floor = floor_ms(moved, bandwidth)
    flags = [f"faster than memory allows: {cand.median_ms:.4f} ms for {moved / 1e6:.0f} MB (floor {floor:.4f} ms)"
             ] if cand.median_ms < floor else []
    return {"verified": True, **errors, "flags": flags, "candidate": vars(cand), "reference": vars(ref),
            "speedup": ref.median_ms / cand.median_ms, "bandwidth_gbs": bandwidth / 1e9, "floor_ms": floor}


def _check_once(model: torch.nn.Module, forward: Callable[..., Any], extras: list[torch.Tensor], inputs: list[Any],
                kept: list[Any], errors: dict[str, float], where: str) -> None:
    with torch.no_grad():
        want = model(*[x.clone() if isinstance(x, torch.Tensor) else x for x in inputs])  # first
    kept.append(want)
    wants = want if isinstance(want, tuple | list) else [want]
    _poison_free_memory(list(wants))
    mine = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
    try:
        got = forward(*mine, *extras)
        torch.cuda.synchronize()
    except RuntimeError as exc:
        raise fail(f"the kernel failed: {str(exc).strip().splitlines()[0]}", at=where) from exc
    for index, (before, after) in enumerate(zip(inputs, mine, strict=True)):
        if isinstance(before, torch.Tensor) and not torch.equal(before, after):
            raise fail(f"the kernel modifies its input {index}", at=where)
    gots = got if isinstance(got, tuple | list) else [got]
    if len(gots) != len(wants) or not all(isinstance(g, torch.Tensor) for g in gots):
        raise fail(f"the kernel returns {len(gots)} values where the reference returns {len(wants)} tensors", at=where)
    for index, (g, w) in enumerate(zip(gots, wants, strict=True)):
        comparison = compare(f"output {index}", g, w)
        record(errors, comparison)
        if not comparison.ok:
            raise fail(comparison.detail, at=where)


def _poison_free_memory(like: list[Any]) -> None:
    """Fill the allocator's free blocks of the outputs' sizes with NaN, so an output the kernel allocates
    but never writes cannot hold a stale result (the outputs are poisoned even though the kernel allocates them)."""
    blocks = [torch.empty_like(w).fill_(float("nan") if w.is_floating_point() else -1)
              for w in like if isinstance(w, torch.Tensor) for _ in range(4)]
    del blocks
