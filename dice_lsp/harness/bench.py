"""Benchmark a .cu file: build it, then verify and time its kernels in child processes.

Two ways to say how a kernel runs (docs/BENCHMARKING.md): a `dice:launch` spec in the file (kernel-level:
nvcc → cubin → launched directly; the reference is another kernel, of this file or of `--ref REF.cu`), or a
KernelBench reference `REF.py` beside the file (same stem), named by `--ref`, or by a `// dice:reference
PATH` comment (the .cu is a torch extension). Without a GPU the build still runs and the report says why
nothing was timed. A kernel that passed is run once more under compute-sanitizer's memcheck where that
tool is on PATH (`KernelResult.memcheck` says what it found, or why it did not run); a flagged or failed
kernel never gets a speedup, and its `failure` says why it was rejected.
"""

from __future__ import annotations

import hashlib
import re
import shutil
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar

from dice_lsp.errors import DiceError
from dice_lsp.harness.build import Build, build_cubin, evict, mark_used, write_if_changed
from dice_lsp.harness.isolate import Outcome, run_isolated
from dice_lsp.harness.limits import Limits
from dice_lsp.harness.spec import LaunchSpec, find_specs
from dice_lsp.toolchain.cache import cache_folder, local_includes
from dice_lsp.toolchain.flags import CompileFlags
from dice_lsp.toolchain.nvcc import SOURCE_NAME, linked_folders
from dice_lsp.toolchain.report import Diagnostic, Severity, parse_diagnostics
from dice_lsp.wording import Said

_REFERENCE_COMMENT = re.compile(r"//\s*dice:reference\s+(\S+)")
_STREAMS = re.compile(r"\b(cudaStreamCreate\w*|cuStreamCreate\w*|getStreamFromPool|cudaStreamBeginCapture)\b")
_SANITIZER_SUMMARY = re.compile(r"ERROR SUMMARY: (\d+) errors?")
_SANITIZER_ERROR = re.compile(r"=+ (Invalid __\w+__ \w+ of size \d+ bytes|Program hit \S+.*|\w+ error.*)")
MEMCHECK_EXIT = 86  # compute-sanitizer's exit status when it found errors


@dataclass
class KernelResult:
    name: str
    verified: bool = False
    median_ms: float | None = None
    spread_pct: float | None = None
    reference_ms: float | None = None
    speedup_vs_ref: float | None = None
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    flags: list[str] = field(default_factory=list)
    failure: str | None = None  # why it was not verified or timed
    shapes: list[str] = field(default_factory=list)  # the shapes it was verified at (one: said in the report)
    limitations: list[str] = field(default_factory=list)  # shapes outside the problem it refuses with an error of
    # its own: "refuses shape (1025, 8193): cols must be a multiple of 4" (verified on the problem's shapes)
    memcheck: str | None = None  # compute-sanitizer's verdict, or why that pass did not run

    def to_json(self) -> dict[str, Any]:
        return dict(vars(self))


@dataclass(frozen=True)
class BuildFailure:
    """A torch extension's failed build: no line of the file to point at, so the message and the end of the
    build's output. Read like a `Diagnostic` at the top of the file (`line`, `character`, `severity`)."""

    message: str
    detail: str
    line: ClassVar[int] = 0
    character: ClassVar[int] = 0
    severity: ClassVar[Severity] = "error"

    def to_json(self) -> dict[str, Any]:
        return {"severity": self.severity, "message": self.message, "detail": self.detail}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> BuildFailure:
        return cls(data["message"], data["detail"])


BenchProblem = Diagnostic | BuildFailure


def problem_from_json(data: dict[str, Any]) -> BenchProblem:
    """A `BenchReport` diagnostic from its JSON: nvcc's (with a range) or a build failure's (without one)."""
    return Diagnostic.from_json(data) if "range" in data else BuildFailure.from_json(data)


@dataclass
class BenchReport:
    gpu: bool
    compile_ok: bool
    diagnostics: list[BenchProblem]
    kernels: list[KernelResult]
    reason: str | None = None

    def to_json(self) -> dict[str, Any]:
        diagnostics = [d.to_json() for d in self.diagnostics]
        return {"gpu": self.gpu, "compile": {"ok": self.compile_ok, "diagnostics": diagnostics},
                "kernels": [k.to_json() for k in self.kernels], "reason": self.reason}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> BenchReport:
        """A report a team server sent (`to_json`)."""
        diagnostics = [problem_from_json(d) for d in data["compile"]["diagnostics"]]
        kernels = [KernelResult(**kernel) for kernel in data["kernels"]]
        return cls(data["gpu"], data["compile"]["ok"], diagnostics, kernels, data["reason"])


def gpu_arch() -> str | None:
    """`sm_XY` of the first GPU, or None without one (or without a CUDA build of torch)."""
    import torch

    if not torch.cuda.is_available():
        return None
    major, minor = torch.cuda.get_device_capability()
    return f"sm_{major}{minor}"


def kernelbench_reference(path: Path, text: str, ref: Path | None) -> Path | None:
    """The KernelBench reference for `path`: `--ref` when it is a .py, a `// dice:reference` comment, or a
    .py of the same stem beside the file that defines `get_inputs`."""
    if ref is not None:
        return ref if ref.suffix == ".py" else None
    if match := _REFERENCE_COMMENT.search(text):
        return (path.parent / match.group(1)).resolve()
    sibling = path.with_suffix(".py")
    if sibling.is_file() and "def get_inputs" in sibling.read_text(errors="replace"):
        return sibling
    return None


def has_benchmark(path: Path, text: str) -> bool:
    """Whether the file says how to run its kernels (a launch spec or a KernelBench reference)."""
    return "dice:launch" in text or kernelbench_reference(path, text, None) is not None


def bench_file(path: Path, ref: Path | None = None, limits: Limits = Limits(), flags: CompileFlags | None = None,
               progress: Said | None = None) -> BenchReport:
    say = progress or (lambda _message: None)
    text = path.read_text(encoding="utf-8")
    python_ref = kernelbench_reference(path, text, ref)
    if python_ref is not None:
        return _bench_extension(path, text, python_ref, limits, say)
    ref_text = ref.read_text(encoding="utf-8") if ref is not None else None
    specs = find_specs(text) or (find_specs(ref_text) if ref_text else [])
    if not specs:
        raise DiceError(f"{path.name}: no launch spec (a /* dice:launch ... */ block) and no KernelBench reference "
                        "(REF.py with Model, get_inputs, get_init_inputs); see docs/BENCHMARKING.md")
    arch = gpu_arch()
    flags = replace(flags or CompileFlags(), arch=arch or (flags or CompileFlags()).arch)
    say(f"building {path.name} for {flags.arch}")
    build = build_cubin(text, path.parent, flags)
    diagnostics: list[BenchProblem] = list(parse_diagnostics(build.output, text, Path(SOURCE_NAME)))
    ref_build = build_cubin(ref_text, ref.parent, flags) if ref is not None and ref_text is not None else build
    if not build.ok or not ref_build.ok:
        reason = "does not compile" if not build.ok else f"the reference {ref} does not compile"
        return BenchReport(arch is not None, build.ok, diagnostics, [], reason)
    if arch is None:
        return BenchReport(False, True, diagnostics, [], "no CUDA GPU here: compiled only, nothing verified or timed")
    texts = {spec.kernel: spec_text for spec, spec_text in specs}
    references = {spec.reference for spec, _ in specs}
    results = []
    for spec, spec_text in specs:
        if spec.kernel in references:
            continue  # timed as the reference of another kernel
        say(f"verifying and timing {spec.kernel}")
        results.append(_bench_kernel(spec, spec_text, texts.get(spec.reference or ""), text, build,
                                     ref_build if ref is not None else None, limits))
    return BenchReport(True, True, diagnostics, results)


def bench_rewrite(original: Path, rewritten: str, kernel: str, ref: Path | None = None, limits: Limits = Limits(),
                  flags: CompileFlags | None = None) -> KernelResult:
    """Verify and time `rewritten` (the text of `original` with one kernel changed) against the original.

    Kernel-level: the rewritten kernel is checked against and compared with the original's kernel of the
    same name, launched as the file's spec for it says. KernelBench: the rewritten file is built as the
    extension and checked against the Python reference, as `bench_file` does. Needs a GPU.
    """
    text = original.read_text(encoding="utf-8")
    python_ref = kernelbench_reference(original, text, ref)
    if python_ref is not None:
        digest = hashlib.sha256(rewritten.encode()).hexdigest()[:16]
        copy = cache_folder("rewrites") / digest / original.name
        copy.parent.mkdir(parents=True, exist_ok=True)
        write_if_changed(copy, rewritten.encode("utf-8"))
        mark_used(copy.parent)
        evict(copy.parent.parent, keep=copy.parent)
        report = bench_file(copy, python_ref, limits, flags)
        return report.kernels[0] if report.kernels else KernelResult(kernel, failure=report.reason)
    specs = {spec.kernel: (spec, spec_text) for spec, spec_text in find_specs(rewritten) or find_specs(text)}
    if kernel not in specs:
        raise DiceError(f"{original.name}: no launch spec for kernel {kernel!r} (see docs/BENCHMARKING.md)")
    spec, spec_text = specs[kernel]
    arch = gpu_arch()
    if arch is None:
        raise DiceError("no CUDA GPU here: nothing can be verified or timed")
    flags = replace(flags or CompileFlags(), arch=arch)
    build, ref_build = build_cubin(rewritten, original.parent, flags), build_cubin(text, original.parent, flags)
    if not build.ok or not ref_build.ok:
        return KernelResult(kernel, failure="does not compile" if not build.ok else "the original does not compile")
    return _bench_kernel(replace(spec, reference=None), spec_text, None, rewritten, build, ref_build, limits)


def _bench_kernel(spec: LaunchSpec, spec_text: str, ref_spec_text: str | None, text: str, build: Build,
                  ref_build: Build | None, limits: Limits) -> KernelResult:
    """One kernel in a child process; the reference launches as its own spec says, when it has one."""
    result = KernelResult(spec.kernel, flags=_static_flags(text))
    try:
        candidate = {"cubin": str(build.cubin), "symbol": build.mangled(spec.kernel)}
        reference: dict[str, str | None] | None = None
        if ref_build is not None:
            reference = {"cubin": str(ref_build.cubin), "symbol": ref_build.mangled(spec.reference or spec.kernel)}
        elif spec.reference:
            reference = {"cubin": str(build.cubin), "symbol": build.mangled(spec.reference), "spec": ref_spec_text}
    except DiceError as exc:
        result.failure = str(exc)
        return result
    cubins = [Path(c["cubin"]).parent for c in (candidate, reference) if c is not None and c["cubin"]]
    call = "dice_lsp.harness.kernel_level:run"
    payload = {"spec": spec_text, "candidate": candidate, "reference": reference, "trials": limits.trials}
    outcome = run_isolated(call, payload, limits.timeout, limits.memory_mb, readable=cubins, disk_mb=limits.disk_mb)
    return _memcheck(_result(result, outcome.value, outcome.failure, reference is not None), call, payload, limits,
                     cubins)


def extension_cuda_flags(arch: str) -> list[str]:
    """nvcc's flags for a torch extension built for `arch` (`sm_90`): what its build folder is keyed by."""
    number = arch.removeprefix("sm_")
    return ["-O3", f"-gencode=arch=compute_{number},code=sm_{number}"]


def extension_key(text: str, folder: Path, cuda_flags: list[str]) -> str:
    """The build folder's name for a torch extension: its source, the local files it includes (their content,
    not where they lie: a team server's request folder is new every time), torch's version and the flags.
    Nothing else, so that every run of the same source with the same flags (a build ahead of time, `bench`,
    the editor's bench on save, a rewrite's) finds the same folder and ninja's earlier build there."""
    import torch

    digest = hashlib.sha256()
    parts = [text.encode(), torch.__version__.encode(), *(flag.encode() for flag in cuda_flags)]
    for included, content in local_includes(text, [folder]):
        name = included.relative_to(folder.resolve()) if included.is_relative_to(folder.resolve()) else included.name
        parts += [str(name).encode(), hashlib.sha256(content).digest()]
    for part in parts:
        digest.update(len(part).to_bytes(8, "little") + part)
    return digest.hexdigest()[:16]


def extension_job(path: Path, text: str, reference: Path, arch: str, limits: Limits = Limits()) -> dict[str, Any]:
    """The torch extension's build folder, made ready, and the job its `build` and `run` children get. The
    source is written there only when the folder does not hold it already (`write_if_changed`): ninja then
    finds its earlier build up to date, and a second benchmark of the same file does not compile again."""
    cuda_flags = extension_cuda_flags(arch)
    digest = extension_key(text, path.resolve().parent, cuda_flags)
    build_dir = cache_folder("extensions") / digest
    build_dir.mkdir(parents=True, exist_ok=True)
    mark_used(build_dir)
    source = build_dir / SOURCE_NAME  # the build's commands run through a shell: only generated names in them
    write_if_changed(source, text.encode("utf-8"))
    includes = [str(link) for link in linked_folders(build_dir, [path.resolve().parent])]
    return {"source": str(source), "includes": includes, "name": f"dice_ext_{digest}", "build_dir": str(build_dir),
            "cuda_flags": cuda_flags, "reference": str(reference.resolve()), "trials": limits.trials}


def _bench_extension(path: Path, text: str, reference: Path, limits: Limits, say: Said) -> BenchReport:
    """The KernelBench path: build the torch extension in one child, verify and time it in another."""
    if not reference.is_file():
        raise DiceError(f"reference {reference} not found")
    result = KernelResult("forward", flags=_static_flags(text))
    arch = gpu_arch()
    if arch is None:
        return BenchReport(False, True, [], [], "no CUDA GPU here: a torch extension is built and run on the GPU "
                                               "host only; nothing verified or timed")
    job = extension_job(path, text, reference, arch, limits)
    build_dir = Path(job["build_dir"])
    say(f"building the torch extension {path.name} (about a minute the first time)")
    sources = [path.resolve().parent, reference.resolve().parent]  # what a sandboxed child may read
    built = run_isolated("dice_lsp.harness.extension:build", job, limits.build_timeout, limits.memory_mb,
                         readable=sources, writable=[build_dir], disk_mb=limits.disk_mb)
    evict(build_dir.parent, keep=build_dir)  # an extension is ~16 MB: the folder is bounded as the builds are
    if not built.ok:
        failure = BuildFailure(built.failure or "build failed", built.output[-2000:])
        return BenchReport(True, False, [failure], [], "does not compile")
    say(f"verifying and timing {path.name} against {reference.name}")
    call = "dice_lsp.harness.extension:run"
    outcome = run_isolated(call, job, limits.timeout, limits.memory_mb, readable=[*sources, build_dir],
                           disk_mb=limits.disk_mb)
    result = _result(result, outcome.value, outcome.failure, True)
    return BenchReport(True, True, [], [_memcheck(result, call, job, limits, [*sources, build_dir])])


def _static_flags(text: str) -> list[str]:
    found = sorted(set(_STREAMS.findall(text)))
    return [f"creates streams ({', '.join(found)}): its work may escape the timed stream"] if found else []


def _result(result: KernelResult, value: dict[str, Any] | None, failure: str | None,
            has_reference: bool) -> KernelResult:
    """The child's answer as a result: verified only with a reference and no flag; a speedup only for a
    verified kernel; otherwise `failure` says why not."""
    if value is None:
        result.failure = failure
        return result
    result.median_ms = value["candidate"]["median_ms"]
    result.spread_pct = value["candidate"]["spread_pct"]
    result.shapes = list(value.get("shapes", []))
    result.limitations = list(value.get("limitations", []))
    if "reference" in value:
        result.reference_ms = value["reference"]["median_ms"]
    if has_reference:
        result.max_abs_err, result.max_rel_err = value["max_abs_err"], value["max_rel_err"]
    result.flags += value["flags"]
    result.verified = bool(value["verified"]) and has_reference and not result.flags  # flagged: not celebrated
    if not has_reference:
        result.failure = "no reference to verify against (add `reference` to the launch spec or pass --ref)"
    elif result.flags:
        result.failure = f"rejected: {'; '.join(result.flags)}"
    if result.verified and "reference" in value:
        result.speedup_vs_ref = value["speedup"]
    return result


def _memcheck(result: KernelResult, call: str, payload: dict[str, Any], limits: Limits,
              readable: list[Path]) -> KernelResult:
    """Run a verified kernel's checks once more under compute-sanitizer's memcheck (each tensor its own
    allocation, so that the tool sees every byte out of bounds); errors reject the kernel."""
    if not result.verified:
        return result
    tool = shutil.which("compute-sanitizer")
    if tool is None or not limits.memcheck:
        result.memcheck = "skipped: " + ("compute-sanitizer is not on PATH" if tool is None else "turned off")
        return result
    wrapper = [tool, "--tool", "memcheck", "--error-exitcode", str(MEMCHECK_EXIT), "--print-limit", "4"]
    outcome = run_isolated(call, {**payload, "check_only": True, "trials": 1}, limits.timeout, limits.memory_mb,
                           {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"}, readable, wrapper=wrapper, disk_mb=limits.disk_mb)
    result.memcheck, failure = memcheck_verdict(outcome)
    if failure is not None:
        result.verified, result.failure, result.speedup_vs_ref = False, failure, None
    return result


def memcheck_verdict(outcome: Outcome) -> tuple[str, str | None]:
    """(what the memcheck pass says, the kernel's failure or None) from the sanitized child's outcome."""
    summary = _SANITIZER_SUMMARY.search(outcome.output)
    errors = int(summary.group(1)) if summary else 0
    if errors:
        first = _SANITIZER_ERROR.search(outcome.output)
        detail = f": {first.group(1).strip()}" if first else ""
        return f"{errors} errors", f"compute-sanitizer memcheck found {errors} errors{detail}"
    if outcome.ok and summary:
        return "passed", None
    if outcome.failure and any(phrase in outcome.failure for phrase in _CHECK_FAILURES):
        # the harness's own checks failed in the sanitized run (each tensor alone there, so an overrun lands
        # in another tensor's guard region): as much a rejection as a memcheck error
        return "failed the checks", outcome.failure
    return f"did not finish: {outcome.failure or 'no error summary'}", None


# what the harness's checks say when a kernel is wrong (not when the run itself breaks, as a timeout does)
_CHECK_FAILURES = ("out of the bounds", "differ from the reference", "never written", "non-finite values",
                   "modifies its input")
