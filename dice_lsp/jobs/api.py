"""The jobs every surface runs, one request dataclass each, and `Jobs`: the one interface that runs them.

A job works on a `Document` (the file, its text as the caller has it now, the settings it runs with and how it
compiles here): `CompleteJob`, `CheckJob`, `BenchJob`, `OptimizeJob`, `RepairJob`. `Jobs` answers each with its
typed result (`Completed`, `CheckReport`, `BenchReport`, `OptimizeReport`, `RepairResult`), whether it runs
here (`jobs.local.LocalJobs`: this machine's model host, nvcc and GPU) or on a team server
(`remote.team.TeamJobs`: one request each). The command line (through `asyncio.run`), the language server and
the team server's service all call through it, so each job is written once and each surface only builds
requests and shows results.

A job's own parameters are declared here once, with the form a team server's request carries them in
(`params`), its reading back (`reader`) and the arguments they become where the job runs (`arguments`: what a
job leaves out, None, is the runner's default, `Defaults`); so a new parameter is a field here and its use in
the code that runs the job. The settings travel beside them: the `dice.*` keys that shape one request.

Cancellation, the same from both implementations: a job whose task is cancelled re-raises
`asyncio.CancelledError` once its work has stopped; a job replaced by a newer one with the same key raises
`Cancelled`. Any other failure the user can act on is a `DiceError`. Importing this module loads no torch.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from dice_lsp.harness.limits import Limits
from dice_lsp.settings import REPAIR_CANDIDATES, Settings
from dice_lsp.textdoc import Position
from dice_lsp.toolchain.flags import CompileFlags
from dice_lsp.wording import Said

if TYPE_CHECKING:
    from dice_lsp.complete import Compiler, Completion
    from dice_lsp.completion.sources import Source
    from dice_lsp.harness.bench import BenchReport
    from dice_lsp.optimize import OptimizeReport, RepairResult
    from dice_lsp.toolchain.report import CheckReport

T = TypeVar("T")


@dataclass(frozen=True)
class Document:
    """The file a job works on: where it is, its text as the caller has it now (an editor's buffer may be ahead
    of the disk), the settings the job runs with, how the file compiles here (read only by a job that runs
    here), and the reference its kernels are measured against (None: the one the file names or has beside
    it)."""

    path: Path
    text: str
    settings: Settings
    flags: Callable[[], CompileFlags]
    ref: Path | None = None
    key: str = ""  # a newer job with the same key replaces this one ("": none does)
    said: Said | None = None  # progress lines, callable from any thread


def no_judge() -> Compiler | None:
    """No verdict on fills: the checks before it decide."""
    return None


@dataclass(frozen=True)
class CompleteJob:
    """The completion at `position` (or of `selection`). `compiler` and `front_end` make the judges of fills here
    (nvcc, clang's front end; made only when the job runs here); `sources` propose lines besides the model and
    the document (a workspace's index): asked here, and what they propose is sent along to a team server."""

    document: Document
    position: Position
    compiler: Callable[[], Compiler | None] = no_judge
    front_end: Callable[[], Compiler | None] = no_judge
    sources: tuple[Source, ...] = ()
    selection: tuple[Position, Position] | None = None

    def params(self) -> dict[str, Any]:
        where = {"line": self.position.line, "character": self.position.character}
        if self.selection is None:
            return where
        return {**where, "selection": [[end.line, end.character] for end in self.selection]}

    @classmethod
    def reader(cls, params: dict[str, Any], sources: tuple[Source, ...] = ()) -> Callable[[Document], CompleteJob]:
        """`params`'s job (with `sources`: what the client's own sources proposed, sent along)."""
        span = params.get("selection")
        selection = None if span is None else (Position(*span[0]), Position(*span[1]))
        position = Position(int(params["line"]), int(params["character"]))
        return partial(cls, position=position, sources=sources, selection=selection)

    def arguments(self) -> dict[str, Any]:
        """`complete.complete_at`'s, besides the document, the judges and the cancellation."""
        return {"position": self.position, "selection": self.selection, "sources": self.sources}


@dataclass(frozen=True)
class CheckJob:
    """nvcc's diagnostics and each kernel's resources."""

    document: Document

    def params(self) -> dict[str, Any]:
        return {}

    @classmethod
    def reader(cls, _params: dict[str, Any]) -> Callable[[Document], CheckJob]:
        return cls

    def arguments(self, _defaults: Defaults) -> dict[str, Any]:
        """`toolchain.report.check_source`'s, besides the document."""
        return {}


@dataclass(frozen=True)
class BenchJob:
    """Verify the file's kernels against the reference and time them on a GPU."""

    document: Document
    timeout: float | None = None  # seconds per kernel's run
    trials: int | None = None  # random-input trials per size

    def params(self) -> dict[str, Any]:
        return given(timeout=self.timeout, trials=self.trials)

    @classmethod
    def reader(cls, params: dict[str, Any]) -> Callable[[Document], BenchJob]:
        return partial(cls, timeout=read(float, params, "timeout"), trials=read(int, params, "trials"))

    def arguments(self, defaults: Defaults) -> dict[str, Any]:
        """`harness.bench.bench_file`'s, besides the document."""
        return {"limits": Limits(timeout=or_default(self.timeout, defaults.timeout),
                                 trials=or_default(self.trials, defaults.trials))}


@dataclass(frozen=True)
class OptimizeJob:
    """Rewrite `kernel` with the model: generate, compile, repair, verify, time and rank (`optimize.loop`); how
    many rewrites and repair rounds, and the sampler, are the settings'. An untrusted document's rewrites never
    run on a GPU."""

    document: Document
    kernel: str
    timeout: float | None = None  # seconds per candidate's run

    def params(self) -> dict[str, Any]:
        untrusted = {} if self.document.settings.trusted else {"trusted": False}
        return {"kernel": self.kernel, **given(timeout=self.timeout), **untrusted}

    @classmethod
    def reader(cls, params: dict[str, Any]) -> Callable[[Document], OptimizeJob]:
        """Only an explicit `trusted: false` makes the document untrusted (a team server's own settings never
        trust: `trusted` is the editor's word)."""
        trusted = params.get("trusted") is not False
        kernel, timeout = str(params["kernel"]), read(float, params, "timeout")

        def job(document: Document) -> OptimizeJob:
            settings = replace(document.settings, trusted=trusted)
            return cls(replace(document, settings=settings), kernel, timeout)

        return job

    def arguments(self, defaults: Defaults) -> dict[str, Any]:
        """`optimize.OptimizeRequest.from_settings`'s, besides the document."""
        return {"kernel": self.kernel, "limits": Limits(timeout=or_default(self.timeout, defaults.timeout))}


@dataclass(frozen=True)
class RepairJob:
    """Re-write the lines nvcc rejects until the file compiles (`optimize.repair`); the rounds, the time budget
    and the sampler are the settings'."""

    document: Document
    candidates: int | None = None  # rewrites tried per round

    def params(self) -> dict[str, Any]:
        return given(candidates=self.candidates)

    @classmethod
    def reader(cls, params: dict[str, Any]) -> Callable[[Document], RepairJob]:
        return partial(cls, candidates=read(int, params, "candidates"))

    def arguments(self, defaults: Defaults) -> dict[str, Any]:
        """`optimize.repair`'s, besides the document and the settings."""
        return {"candidates": or_default(self.candidates, defaults.repair_candidates)}


Job = CompleteJob | CheckJob | BenchJob | OptimizeJob | RepairJob


@dataclass(frozen=True)
class Defaults:
    """What a job that leaves a parameter out (None) gets where it runs: the harness's and repair's own; a team
    server's are these within its limits."""

    timeout: float = Limits.timeout
    trials: int = Limits.trials
    repair_candidates: int = REPAIR_CANDIDATES


@dataclass(frozen=True)
class Completed:
    """A completion, the model that wrote it (name, device), where it was made (`N model calls`, or the team
    server's address), and its JSON as it leaves (`Completion.to_json`, or a team server's reply as it came)."""

    completion: Completion
    model: str
    device: str
    where: str
    json: dict[str, Any]


@dataclass(frozen=True)
class Starting:
    """Jobs being made ready: `loading` names what a progress report shows while `ready` runs (None: no report);
    `ready` ends with the model's state (`ready`, `error`)."""

    loading: str | None
    ready: Awaitable[str]


class Jobs(Protocol):
    """The jobs, run here or on a team server; each answers its typed result."""

    def start(self, settings: Settings) -> Starting: ...

    async def complete(self, job: CompleteJob) -> Completed: ...

    async def check(self, job: CheckJob) -> CheckReport: ...

    async def can_bench(self, tell: Callable[[str], None]) -> bool:
        """Whether a benchmark can run (`tell` hears once why not)."""
        ...

    async def bench(self, job: BenchJob) -> BenchReport: ...

    async def optimize(self, job: OptimizeJob) -> OptimizeReport: ...

    async def repair(self, job: RepairJob) -> RepairResult: ...

    async def close(self) -> None: ...


def given(**values: Any) -> dict[str, Any]:
    """The parameters that are set (a request leaves the others out: the runner's defaults apply)."""
    return {name: value for name, value in values.items() if value is not None}


def read(kind: Callable[[Any], Any], params: dict[str, Any], name: str) -> Any:
    """`params[name]` as `kind`, None where the request leaves it out."""
    value = params.get(name)
    return None if value is None else kind(value)


def or_default(value: T | None, default: T) -> T:
    return default if value is None else value


__all__ = ["BenchJob", "CheckJob", "CompleteJob", "Completed", "Defaults", "Document", "Job", "Jobs", "OptimizeJob",
           "RepairJob", "Starting", "given", "no_judge", "or_default", "read"]
