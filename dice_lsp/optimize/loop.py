"""Optimize one kernel: generate rewrites, compile them, repair what fails, verify and time, rank.

With a GPU, the survivors are verified against the original kernel and timed by the harness
(`dice_lsp.harness.bench.bench_rewrite`) and ranked by verified speedup. Without one they are ranked by
nvcc's resource report (spills, stack, registers) and reported, the top one as a draft to read, but none is
offered as an edit: an unverified rewrite may be wrong; so are they when the request says why they must not run
(`unverified`: an untrusted workspace). The model runs
through `run_model`, so a language server can keep it on its own thread between the compile steps.
"""

from __future__ import annotations

import difflib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dice_lsp.engine.fill_types import CancelCheck
from dice_lsp.engine.sampler_config import SamplerConfig
from dice_lsp.errors import Cancelled, DiceError
from dice_lsp.harness.bench import bench_rewrite, gpu_arch
from dice_lsp.harness.limits import Limits
from dice_lsp.optimize import candidates as gen
from dice_lsp.optimize.repair import Check, ModelRunner, repair
from dice_lsp.settings import Settings
from dice_lsp.toolchain.flags import CompileFlags
from dice_lsp.toolchain.report import KernelResources, base_name
from dice_lsp.wording import Said, counted

if TYPE_CHECKING:  # torch loads with the model, not with this module
    from dice_lsp.engine import LoadedModel


@dataclass
class Rewrite:
    """One candidate, as far as it got."""

    origin: str
    text: str  # the whole file with the candidate's body
    compiled: bool = False
    repair_rounds: int = 0
    verified: bool = False
    speedup: float | None = None
    median_ms: float | None = None
    reference_ms: float | None = None
    resources: KernelResources | None = None
    failure: str | None = None
    less_work: str | None = None  # what of the original's work it drops (`candidates.dropped_work`), if any
    limitations: list[str] = field(default_factory=list)  # shapes outside the problem it refuses (verified on the
    # problem's own): `KernelResult.limitations`
    rank: int = 0
    diff: str = ""

    def to_json(self) -> dict[str, Any]:
        found = {k: v for k, v in vars(self).items() if k not in ("text", "resources")}
        found["resources"] = vars(self.resources) if self.resources is not None else None
        return found

    @classmethod
    def from_json(cls, data: dict[str, Any], text: str = "") -> Rewrite:
        """A candidate a team server sent (`to_json`); its whole text travels only for the best one."""
        kept = {k: v for k, v in data.items() if k not in ("text", "resources")}
        resources = data.get("resources")
        return cls(**kept, text=text, resources=KernelResources(**resources) if resources is not None else None)


@dataclass
class OptimizeReport:
    kernel: str
    gpu: bool
    rewrites: list[Rewrite] = field(default_factory=list)  # ranked, best first
    generated: int = 0  # before deduplication
    wall_s: float = 0.0
    unverified: str = "no GPU"  # why nothing was verified, when `gpu` is false

    @property
    def compiled(self) -> int:
        return sum(r.compiled for r in self.rewrites)

    @property
    def verified(self) -> int:
        return sum(r.verified for r in self.rewrites)

    @property
    def faster(self) -> int:
        return sum(r.verified and (r.speedup or 0) > 1 for r in self.rewrites)

    @property
    def best(self) -> Rewrite | None:
        """The rewrite to offer as an edit: the fastest one verified against the original that beats it. Nothing
        unverified is ever offered as an edit (without a GPU the candidates are ranked and reported: `draft`)."""
        top = self.rewrites[0] if self.rewrites else None
        if top is None or not self.gpu or not (top.verified and (top.speedup or 0) > 1):
            return None
        return top

    @property
    def draft(self) -> Rewrite | None:
        """Where nothing could be verified: the top-ranked compiled candidate that does not do less work than the
        original (by nvcc's resource report), for the user to read as a diff; never an applicable change."""
        top = self.rewrites[0] if self.rewrites else None
        if self.gpu or top is None or not top.compiled or top.less_work is not None:
            return None
        return top

    def summary(self) -> str:
        checked = f"none verified ({self.unverified})"
        if self.gpu:
            checked = f"{self.verified} verified, {self.faster} faster"
        counts = f"{len(self.rewrites)} distinct candidates of {self.generated}, {self.compiled} compiled, {checked}"
        less = sum(r.less_work is not None and not r.verified for r in self.rewrites)
        if less:
            counts += f", {less} doing less work than the original (never offered unverified)"
        best, draft = self.best, self.draft
        if best is not None:
            limited = "".join(f"; limited: {limitation}" for limitation in best.limitations)
            return (f"{self.kernel}: {best.speedup:.2f}× faster ({best.reference_ms:.4f} ms → "
                    f"{best.median_ms:.4f} ms, verified{limited}; {best.origin}); {counts}")
        if draft is not None:
            where = (" (a GPU verifies and times them: this machine's, or a team server's, dice.server.url)"
                     if self.unverified == "no GPU" else "")
            return (f"{self.kernel}: nothing to apply: no rewrite could be verified{where}; the top-ranked draft "
                    f"({draft.origin}, {_resources(draft.resources)}) is shown as a diff only; {counts}")
        return f"{self.kernel}: no faster rewrite found ({counts})"

    def to_json(self) -> dict[str, Any]:
        best, draft = self.best, self.draft
        return {"kernel": self.kernel, "gpu": self.gpu, "unverified": None if self.gpu else self.unverified,
                "generated": self.generated, "compiled": self.compiled,
                "verified": self.verified, "faster": self.faster, "wall_s": round(self.wall_s, 2),
                "candidates": [r.to_json() for r in self.rewrites], "best": best.to_json() if best else None,
                "text": best.text if best else None, "draft": draft.to_json() if draft else None,
                "summary": self.summary()}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> OptimizeReport:
        """A report a team server sent (`to_json`); `to_json` gives it back as it came."""
        rewrites = [Rewrite.from_json(r) for r in data["candidates"]]
        if data["best"] is not None and rewrites:
            rewrites[0].text = data["text"]  # the best is the first ranked; only its text is sent
        return cls(data["kernel"], data["gpu"], rewrites, data["generated"], data["wall_s"],
                   data["unverified"] or cls.unverified)


@dataclass(frozen=True)
class OptimizeRequest:
    path: Path  # the file on disk (for includes, the reference and the names in diffs); never written
    text: str  # its current content (an editor's buffer may be ahead of the disk)
    kernel: str
    ref: Path | None = None
    candidates: int = Settings.optimize_candidates
    rounds: int = Settings.repair_rounds
    sampler: SamplerConfig = field(default_factory=SamplerConfig)
    flags: CompileFlags = field(default_factory=CompileFlags)
    limits: Limits = field(default_factory=Limits)
    unverified: str | None = None  # set: never run the candidates (this says why); ranked as without a GPU

    @classmethod
    def from_settings(cls, path: Path, text: str, kernel: str, settings: Settings, flags: CompileFlags, *,
                      ref: Path | None = None, limits: Limits | None = None,
                      unverified: str | None = None) -> OptimizeRequest:
        """The request the `dice.*` settings make: their `optimize_candidates`, `repair_rounds` and sampler
        (the CLI, the language server and the team server all build it here)."""
        return cls(path=path, text=text, kernel=kernel, ref=ref, candidates=settings.optimize_candidates,
                   rounds=settings.repair_rounds, sampler=settings.sampler_config(), flags=flags,
                   limits=limits if limits is not None else Limits(), unverified=unverified)


def optimize(run_model: Callable[[Callable[[LoadedModel], Any]], Any], request: OptimizeRequest, check: Check,
             cancel: CancelCheck | None = None, said: Said | None = None) -> OptimizeReport:
    started = time.perf_counter()
    say = said or (lambda _message: None)
    text = request.text
    kernel = gen.find_kernel(text, request.kernel)
    original_body = gen.body_of(text, kernel)
    made = run_model(lambda model: gen.generate(model, text, kernel, request.candidates, request.sampler, cancel))
    unique = gen.distinct(made, original_body)
    say(f"generated {counted(len(made), 'candidate')}, {len(unique)} distinct")
    gpu = request.unverified is None and gpu_arch() is not None
    report = OptimizeReport(request.kernel, gpu, generated=len(made), unverified=request.unverified or "no GPU")
    report.rewrites = [Rewrite(c.origin, gen.with_body(text, kernel, c.body)) for c in unique]
    pointers = gen.pointer_parameters(text, kernel)
    for index, rewrite in enumerate(report.rewrites, 1):
        _stop_if(cancel)
        _compile(rewrite, run_model, request, check, cancel)
        if rewrite.compiled:
            rewrite.less_work = _less_work(rewrite.text, request.kernel, original_body, pointers)
        say(f"compiled {sum(r.compiled for r in report.rewrites[:index])}/{index} of {len(report.rewrites)}")
    if report.gpu:
        survivors = [r for r in report.rewrites if r.compiled]
        for index, rewrite in enumerate(survivors, 1):
            _stop_if(cancel)
            _verify(rewrite, request)
            say(f"verified and timed {index}/{len(survivors)}: {sum(r.verified for r in survivors)} verified")
    report.rewrites = ranked(report.rewrites, report.gpu)
    for rank, rewrite in enumerate(report.rewrites, 1):
        rewrite.rank, rewrite.diff = rank, unified_diff(request.path, text, rewrite.text)
    report.wall_s = time.perf_counter() - started
    return report


def _stop_if(cancel: CancelCheck | None) -> None:
    if cancel is not None and cancel():
        raise Cancelled("optimize cancelled")


def _compile(rewrite: Rewrite, run_model: ModelRunner, request: OptimizeRequest, check: Check,
             cancel: CancelCheck | None) -> None:
    """Compile the rewrite; repair it when it fails (re-writing only the rejected lines)."""
    result = repair(run_model, rewrite.text, check, request.rounds, sampler=request.sampler, cancel=cancel)
    rewrite.text, rewrite.compiled, rewrite.repair_rounds = result.text, result.compiles, result.rounds
    if result.compiles:
        rewrite.resources = next((k for k in result.report.kernels if base_name(k.name) == request.kernel), None)
    else:
        rewrite.failure = f"does not compile: {result.errors[0].message}"


def _less_work(text: str, name: str, original_body: str, pointers: set[str]) -> str | None:
    """`candidates.dropped_work` of the compiled rewrite's body (repair may have changed it)."""
    try:
        kernel = gen.find_kernel(text, name)
    except DiceError:
        return "the kernel's body is not found in the rewrite"
    return gen.dropped_work(original_body, gen.body_of(text, kernel), pointers)


def _verify(rewrite: Rewrite, request: OptimizeRequest) -> None:
    try:
        result = bench_rewrite(request.path, rewrite.text, request.kernel, request.ref, request.limits, request.flags)
    except DiceError as exc:
        rewrite.failure = str(exc)
        return
    rewrite.verified, rewrite.speedup = result.verified, result.speedup_vs_ref
    rewrite.median_ms, rewrite.reference_ms = result.median_ms, result.reference_ms
    rewrite.limitations = list(result.limitations)
    if not result.verified:
        rewrite.failure = result.failure or "; ".join(result.flags) or "not verified"


def ranked(rewrites: list[Rewrite], gpu: bool) -> list[Rewrite]:
    """Verified and fastest first (with a GPU); otherwise compiled ones by their resource report. An
    unverified rewrite that does less work than the original (`less_work`) comes after every other."""
    def key(r: Rewrite) -> tuple[float, ...]:
        res = r.resources
        cost = (res.spill_stores + res.spill_loads, res.stack_bytes, res.registers) if res else (1e9, 1e9, 1e9)
        less = r.less_work is not None and not r.verified
        if gpu:
            return (not r.verified, less, not r.compiled, -(r.speedup or 0.0), *cost)
        return (less, not r.compiled, *cost)

    return sorted(rewrites, key=key)


def _resources(res: KernelResources | None) -> str:
    if res is None:
        return "no report"
    return f"{res.registers} registers, {res.spill_stores + res.spill_loads} spill bytes, {res.stack_bytes} B stack"


def unified_diff(path: Path, before: str, after: str) -> str:
    return "".join(difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True),
                                        f"a/{path.name}", f"b/{path.name}"))
