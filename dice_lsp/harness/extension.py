"""The KernelBench-compatible path: a reference `Model` in Python, the candidate a torch extension.

The reference file defines `Model`, `get_inputs()` and `get_init_inputs()`; the .cu defines a host function
`forward` bound with `PYBIND11_MODULE(TORCH_EXTENSION_NAME, m)`, called with the inputs followed by the
model's parameters and buffers. Both jobs run in a child process: `build` (a torch extension takes about a
minute to compile) and `run` (verify, then time). Every input the harness hands `forward` is a copy in the
middle of a guarded buffer, and the memory around the outputs it allocates is guarded too
(`allocator_guard`). Shapes are varied: after the trials at the reference's own shape, one more runs at a
second shape, where the sizes in `get_inputs` (integer literals passed to tensor factories, and the
integer globals it reads) are halved plus one; if the reference rejects that, only the leading size of
each tensor is varied; if it rejects that too, the result lists one shape and says so. A candidate that
refuses such a shape with an error of its own (a TORCH_CHECK on its sizes) is limited, not wrong: the
refusal is listed in the result's `limitations` and the next of those shapes is tried (`check_other_shapes`);
wrong values or a failure on the device at any shape reject it.

`run` imports the module `build` left in the build folder instead of calling torch's `load` again: `load`
rewrites build.ninja and takes a lock file there, and on the team server the run job (the client's
reference and kernel) gets that folder read-only, so that it cannot plant a library for the next request
with the same source.
"""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import re
import types
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import torch

from dice_lsp.harness.allocator_guard import AllocatorGuard
from dice_lsp.harness.limits import Limits
from dice_lsp.harness.timing import Timer, copy_bandwidth, floor_ms
from dice_lsp.harness.verify import Guarded, compare, fail, guarded_copy, random_tensor, record

_ALL_SIZES = frozenset({"randn", "rand", "zeros", "ones", "empty"})  # every positional argument is a size
_FACTORIES = _ALL_SIZES | {"randint", "full", "normal", "randn_like"}  # the others: sizes in a tuple or size=


def _load_extension(payload: dict[str, Any]) -> Any:
    from torch.utils.cpp_extension import load

    Path(payload["build_dir"]).mkdir(parents=True, exist_ok=True)
    flags = payload.get("cuda_flags")  # what the build folder is keyed by (`bench.extension_job`)
    if flags is None:
        major, minor = torch.cuda.get_device_capability()
        flags = ["-O3", f"-gencode=arch=compute_{major}{minor},code=sm_{major}{minor}"]
    return load(name=payload["name"], sources=[payload["source"]], build_directory=payload["build_dir"],
                extra_include_paths=payload.get("includes", []), extra_cuda_cflags=flags, verbose=False)


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


def _inputs(get_inputs: Callable[[], list[Any]], trial: int, generator: torch.Generator) -> list[Any]:
    """get_inputs() on the GPU; floating-point tensors redrawn from the trial's distribution."""
    values = []
    for value in get_inputs():
        if isinstance(value, torch.Tensor):
            value = value.cuda()
            if value.is_floating_point() and trial > 0:
                value = random_tensor(tuple(value.shape), value.dtype, trial, generator)
        values.append(value)
    return values


def varied(value: int) -> int:
    """A size at the second shape: halved plus one (odd, not a multiple of any block or tile)."""
    return value // 2 + 1 if value > 1 else value


def _size_nodes(call: ast.Call) -> list[ast.expr]:
    """The arguments of a tensor factory call that are sizes, in order (none for other calls)."""
    name = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")
    if name not in _FACTORIES:
        return []
    found: list[ast.expr] = []
    positional = call.args if name in _ALL_SIZES else [a for a in call.args if isinstance(a, ast.Tuple | ast.List)]
    if name == "full":
        positional = call.args[:1]
    for arg in [*positional, *(k.value for k in call.keywords if k.arg == "size")]:
        found.extend(arg.elts if isinstance(arg, ast.Tuple | ast.List) else [arg])
    return found


def vary_sizes(function: ast.FunctionDef, ints: Mapping[str, int], leading_only: bool) -> int:
    """Rewrite, in place, the sizes of the tensor factories called in `function` (torch.randn(4096, n),
    torch.randint(0, 9, (64, 64)), size=...): integer literals, and names of the integer globals `ints`,
    become their `varied` values; with `leading_only` only each call's first size. Returns how many."""
    changed = 0
    for call in [n for n in ast.walk(function) if isinstance(n, ast.Call)]:
        sizes = _size_nodes(call)
        for node in sizes[:1] if leading_only else sizes:
            value = ints.get(node.id) if isinstance(node, ast.Name) else getattr(node, "value", None)
            if type(value) is int and varied(value) != value:
                _replace(call, node, ast.copy_location(ast.Constant(varied(value)), node))
                changed += 1
    return changed


def _replace(call: ast.Call, old: ast.expr, new: ast.expr) -> None:
    for holder in [call.args, *(a.elts for a in call.args if isinstance(a, ast.Tuple | ast.List))]:
        for index, node in enumerate(holder):
            if node is old:
                holder[index] = new
    for keyword in call.keywords:
        if keyword.value is old:
            keyword.value = new
        elif isinstance(keyword.value, ast.Tuple | ast.List):
            keyword.value.elts = [new if node is old else node for node in keyword.value.elts]


def second_shape_inputs(reference: types.ModuleType, source: str, leading_only: bool) -> Callable[[], list[Any]] | None:
    """The reference's get_inputs at another shape: its size literals varied and (unless `leading_only`)
    the integer globals it reads too, or only the first size of each tensor; None when nothing varies."""
    tree = ast.parse(source)
    functions = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "get_inputs"]
    if not functions:
        return None
    names = reference.get_inputs.__code__.co_names
    ints = {n: getattr(reference, n) for n in names if type(getattr(reference, n, None)) is int}
    namespace = dict(vars(reference))
    changed = vary_sizes(functions[-1], ints, leading_only)
    if not leading_only:
        namespace.update({n: varied(v) for n, v in ints.items()})
        changed += sum(varied(v) != v for v in ints.values())
    if not changed:
        return None
    exec(compile(ast.Module(body=[functions[-1]], type_ignores=[]), reference.__file__ or "<reference>", "exec"),
         namespace)
    function: Callable[[], list[Any]] = namespace["get_inputs"]
    return function


def shapes_text(inputs: list[Any]) -> str:
    """The inputs' tensor shapes, as the report shows them: "(4096, 8192)", "(64, 3), (3, 5)"."""
    return ", ".join(str(tuple(x.shape)) for x in inputs if isinstance(x, torch.Tensor))


def run(payload: dict[str, Any]) -> dict[str, Any]:
    """Payload: source, name, build_dir (the extension), reference (path of the .py), trials, seed,
    check_only (stop after verification: the pass under compute-sanitizer)."""
    torch.manual_seed(int(payload.get("seed", 0)))
    reference = _reference_module(payload["reference"])
    model = reference.Model(*reference.get_init_inputs()).cuda().eval()
    extras = [*model.parameters(), *model.buffers()]
    extension = _load_built(payload)
    generator = torch.Generator(device="cuda").manual_seed(int(payload.get("seed", 0)))
    checker = _Checker(model, extension.forward, extras, generator, guard_outputs=not payload.get("check_only"))
    for trial in range(int(payload.get("trials", Limits.trials))):
        checker.check(_inputs(reference.get_inputs, trial, generator), f"trial {trial}")
    first = _inputs(reference.get_inputs, 0, generator)
    others = _other_shapes(reference, Path(payload["reference"]).read_text(encoding="utf-8"), model, generator,
                           shapes_text(first))
    shapes, limitations = check_other_shapes(checker, shapes_text(first), others)
    result: dict[str, Any] = {"verified": True, **checker.errors, "flags": [], "shapes": shapes,
                              "limitations": limitations}
    if payload.get("check_only"):
        return result
    inputs = first
    timer = Timer()
    with torch.no_grad():
        cand = timer.time(lambda i: extension.forward(*inputs, *extras))
        ref = timer.time(lambda i: model(*inputs))
        output = extension.forward(*inputs, *extras)
    moved = sum(x.numel() * x.element_size() for x in [*inputs, *extras, output] if isinstance(x, torch.Tensor))
    bandwidth = copy_bandwidth()
    floor = floor_ms(moved, bandwidth)
    if cand.median_ms < floor:
        result["flags"].append(f"faster than memory allows: {cand.median_ms:.4f} ms for {moved / 1e6:.0f} MB "
                               f"(floor {floor:.4f} ms)")
    return {**result, "candidate": vars(cand), "reference": vars(ref), "speedup": ref.median_ms / cand.median_ms,
            "bandwidth_gbs": bandwidth / 1e9, "floor_ms": floor}


def check_other_shapes(checker: _Checker, first: str, others: Iterable[list[Any]]) -> tuple[list[str], list[str]]:
    """Check the candidate at the shapes `others` yields (shapes the problem itself never uses) until one
    passes; the shapes it was verified at (`first`, the problem's own, then that one) and its limitations.

    At such a shape a candidate that refuses its inputs with an error of its own (a TORCH_CHECK: "cols must
    be a multiple of 4") is limited, not wrong: the refusal is recorded ("refuses shape (1025, 8193): cols must
    be a multiple of 4") and the next shape is tried. Wrong values there, a write out of bounds or a failure
    on the device (an illegal address, a launch error) reject it as anywhere else (`_Checker.check` raises)."""
    shapes, limitations = [first], []
    for inputs in others:
        shape = shapes_text(inputs)
        refusal = checker.check(inputs, f"shape {shape}", may_refuse=True)
        if refusal is None:
            shapes.append(shape)
            break
        limitations.append(f"refuses shape {shape}: {refusal}")
    return shapes, limitations


def _other_shapes(reference: types.ModuleType, source: str, model: torch.nn.Module, generator: torch.Generator,
                  first: str) -> Iterator[list[Any]]:
    """Inputs at other shapes that the reference accepts, made as they are asked for: every size varied, then
    only the leading one; none when neither gives another shape the reference runs on (the report then lists
    one shape)."""
    seen = {first}
    for leading_only in (False, True):
        try:
            get_inputs = second_shape_inputs(reference, source, leading_only)
            inputs = _inputs(get_inputs, 0, generator) if get_inputs is not None else []
            if not inputs or shapes_text(inputs) in seen:
                continue
            with torch.no_grad():
                model(*[x.clone() if isinstance(x, torch.Tensor) else x for x in inputs])
        except Exception:  # the reference does not accept that shape: try the next, or check one shape
            continue
        seen.add(shapes_text(inputs))
        yield inputs


# what a failure on the device says (torch's CUDA errors, cuBLAS's, an assert in a kernel): never a refusal
_DEVICE_FAILURE = re.compile(r"CUDA (driver )?error|CUBLAS_STATUS|CUDNN_STATUS|device-side assert|illegal (memory|"
                             r"address|instruction)|misaligned address|unspecified launch failure|out of memory",
                             re.IGNORECASE)
_REFUSALS = (RuntimeError, ValueError, TypeError, IndexError)  # TORCH_CHECK and its _VALUE, _TYPE, _INDEX forms


def is_refusal(exc: BaseException) -> bool:
    """Whether `forward` refused its inputs with an error of its own (a TORCH_CHECK, a ValueError) rather than
    failing on the device, whose errors also come as RuntimeError."""
    accelerator = getattr(torch, "AcceleratorError", None)  # torch >= 2.8: a CUDA error of its own type
    if isinstance(exc, torch.OutOfMemoryError) or (accelerator is not None and isinstance(exc, accelerator)):
        return False
    return isinstance(exc, _REFUSALS) and not _DEVICE_FAILURE.search(str(exc))


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def _synchronize() -> None:
    """Wait for the GPU's work (where the checks run on it; the tests of this module's logic use the CPU)."""
    if torch.cuda.is_available():
        torch.cuda.synchronize()


class _Checker:
    """Runs the reference, then the candidate, on one set of inputs, and says how the candidate failed.

    Every tensor the harness holds while the candidate runs is guarded (`verify.Guarded`): its inputs
    (copies) and the reference outputs kept alive; the outputs the candidate allocates are guarded by
    `AllocatorGuard` (not in the pass under compute-sanitizer, which has no caching allocator to arrange
    and sees those bytes itself)."""

    def __init__(self, model: torch.nn.Module, forward: Callable[..., Any], extras: list[torch.Tensor],
                 generator: torch.Generator, guard_outputs: bool) -> None:
        self.model, self.forward, self.extras, self.generator = model, forward, extras, generator
        self.guard_outputs = guard_outputs
        self.kept: list[Guarded] = []  # every reference output stays alive: no candidate can be handed its memory
        self.errors = {"max_abs_err": 0.0, "max_rel_err": 0.0}

    def check(self, inputs: list[Any], where: str, may_refuse: bool = False) -> str | None:
        """Raise, saying how, where the candidate fails on `inputs`. With `may_refuse` (a shape the problem
        never uses), an error of the candidate's own that left the device and the harness's buffers intact is
        a refusal: its first line is returned. Otherwise None."""
        with torch.no_grad():
            want = self.model(*[x.clone() if isinstance(x, torch.Tensor) else x for x in inputs])  # first
        wants = list(want) if isinstance(want, tuple | list) else [want]
        if not all(isinstance(w, torch.Tensor) for w in wants):
            raise fail("the reference's forward returns something other than tensors", at=where)
        kept = [guarded_copy(w, self.generator) for w in wants]
        del want, wants
        self.kept += kept
        mine = [guarded_copy(x, self.generator) if isinstance(x, torch.Tensor) else x for x in inputs]
        guard = AllocatorGuard([k.nbytes for k in kept])
        try:
            with guard if self.guard_outputs else contextlib.nullcontext(), torch.no_grad():
                got = self.forward(*[m.tensor if isinstance(m, Guarded) else m for m in mine], *self.extras)
                _synchronize()
        except Exception as exc:
            if not may_refuse or not is_refusal(exc):
                raise fail(f"the kernel failed: {_first_line(exc)}", at=where) from exc
            try:
                _synchronize()  # a refusal after a launch that broke the context is that failure
            except Exception as late:
                raise fail(f"the kernel failed: {_first_line(late)}", at=where) from late
            self._buffers_intact(inputs, mine, where)
            return _first_line(exc)
        gots = list(got) if isinstance(got, tuple | list) else [got]
        if len(gots) != len(kept) or not all(isinstance(g, torch.Tensor) for g in gots):
            raise fail(f"the kernel returns {len(gots)} values where the reference returns {len(kept)} tensors",
                       at=where)
        # the outputs' guard regions first: the checks below allocate, and could land there
        if self.guard_outputs and (side := guard.overrun(gots)):
            raise fail(f"the kernel writes out of the bounds of its output (into the guard region {side})", at=where)
        self._buffers_intact(inputs, mine, where)
        for index, (g, k) in enumerate(zip(gots, kept, strict=True)):
            comparison = compare(f"output {index}", g, k.tensor)
            record(self.errors, comparison)
            if not comparison.ok:
                raise fail(comparison.detail, at=where)
        return None

    def _buffers_intact(self, inputs: list[Any], mine: list[Any], where: str) -> None:
        """Raise where the candidate wrote into a guard region of the buffers the harness holds, or changed an
        input."""
        for index, m in enumerate(mine):
            if isinstance(m, Guarded) and (side := m.broken_side()):
                raise fail(f"the kernel writes out of the bounds of its input {index} (into the guard region "
                           f"{side} it)", at=where)
        if any(k.broken_side() for k in self.kept):
            raise fail("the kernel writes out of the bounds of its buffers (into the guard region of a reference "
                       "output the harness keeps)", at=where)
        for index, (before, after) in enumerate(zip(inputs, mine, strict=True)):
            if isinstance(before, torch.Tensor) and not torch.equal(before, after.tensor):
                raise fail(f"the kernel modifies its input {index}", at=where)
