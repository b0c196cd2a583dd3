"""Where the language server's model and GPU jobs run: here (`LocalJobs`: the model host's thread, this
machine's nvcc and GPU) or on a team server (`TeamJobs`: `dice.server.url`, through `TeamServer`).

Both answer with the same typed results (`Completion`, `OptimizeReport`, `RepairResult`, `BenchReport`);
a team server's JSON is read with `from_json` here, at the wire, so the server's handlers never branch on
where a job runs nor read a result by key. `jobs_for` picks one from the settings. No pygls here: the
handlers give each job a `DocumentJob` (the document, a progress function callable from any thread) and
turn what comes back into LSP.

Cancellation, the same from both: a job whose task is cancelled (`$/cancelRequest`, or the user cancelling
its `$/progress`) re-raises `asyncio.CancelledError` once its work has stopped (the model's ticket is
cancelled and the worker thread has returned); a job replaced by a newer one with the same key raises
`Cancelled`. Any other failure the user can act on is a `DiceError`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

from dice_lsp.backends import read_reply
from dice_lsp.complete import Compiler, Completion, complete_at, lf_text
from dice_lsp.completion.sources import Source
from dice_lsp.errors import Cancelled
from dice_lsp.harness.bench import BenchReport, bench_file, gpu_arch, kernelbench_reference
from dice_lsp.harness.limits import Limits
from dice_lsp.jobs.model_host import ModelHost, Ticket
from dice_lsp.lsp.team_server import TeamServer
from dice_lsp.lsp.trust import effective, without_databases
from dice_lsp.optimize import OptimizeReport, OptimizeRequest, RepairResult, checker, optimize, repair
from dice_lsp.remote.client import file_request
from dice_lsp.remote.limits import MAX_PROPOSAL_CHARS, MAX_PROPOSALS
from dice_lsp.settings import UNTRUSTED, Settings
from dice_lsp.textdoc import Position, offset_at
from dice_lsp.toolchain.flags import CompileFlags
from dice_lsp.toolchain.nvcc import find_nvcc

T = TypeVar("T")
NO_GPU = "dice-lsp: no CUDA GPU here; benchmarks on save are off"


@dataclass(frozen=True)
class DocumentJob:
    """One job on one document's text, as the editor has it now."""

    key: str  # a newer job with the same key replaces this one (a document's uri; "optimize URI")
    path: Path
    text: str
    settings: Settings
    flags: Callable[[], CompileFlags]  # how the file compiles here (read when a local job needs it)
    said: Callable[[str], None] | None = None  # progress lines (`$/progress`), callable from any thread


@dataclass(frozen=True)
class Starting:
    """A backend being made ready: `loading` names what a `$/progress` report shows while `ready` runs (None:
    no report); `ready` ends with the message that ends it."""

    loading: str | None
    ready: Awaitable[str]


def proposals(text: str, where: Position, sources: tuple[Source, ...]) -> list[dict[str, Any]]:
    """What this editor's `sources` (its workspace index) propose at `where`, as a team server's request carries
    them (`remote.limits.check_proposals`): the server has the document, not the workspace."""
    lf = lf_text(text)[0]
    cursor = offset_at(lf, where)
    found = [c for source in sources for c in source.candidates(lf[:cursor], lf[cursor:])]
    return [{"text": c.text, "score": min(1.0, max(0.0, c.score)), "files": int(getattr(c, "files", 1)),
             "rivals": int(getattr(c, "rivals", 0))}
            for c in found if c.text.strip() and "\n" not in c.text and len(c.text) <= MAX_PROPOSAL_CHARS
            ][:MAX_PROPOSALS]


class EditorJobs(Protocol):
    """The language server's jobs, run here or on a team server."""

    def start(self, settings: Settings) -> Starting: ...

    async def complete(self, job: DocumentJob, where: Position, compiler: Callable[[], Compiler | None],
                       front_end: Callable[[], Compiler | None] = lambda: None,
                       sources: tuple[Source, ...] = ()) -> Completion:
        """The completion at `where`; `sources`: proposers besides the model and the document (the workspace
        index): asked here, and what they propose is sent along to a team server (`proposals`)."""
        ...

    async def optimize(self, job: DocumentJob, kernel: str) -> OptimizeReport: ...

    async def repair(self, job: DocumentJob) -> RepairResult: ...

    async def can_bench(self, tell: Callable[[str], None]) -> bool: ...

    async def bench(self, job: DocumentJob) -> BenchReport: ...

    async def close(self) -> None: ...


class LocalJobs:
    """This machine: the model on the host's thread, nvcc and the GPU on worker threads. `on_cancelled` hears
    (from the model's thread) how far a fill replaced by a newer one got."""

    def __init__(self, host: ModelHost, on_cancelled: Callable[[str], None]) -> None:
        self.host = host
        self.on_cancelled = on_cancelled
        self.has_gpu: bool | None = None  # looked up on the first benchmark
        self.gpu_lookup = asyncio.Lock()

    def start(self, settings: Settings) -> Starting:
        loading = asyncio.wrap_future(self.host.load(effective(settings)))

        async def ready() -> str:
            await loading
            return self.host.status.state

        return Starting(f"loading {settings.model or 'dice-tiny'}", ready())

    async def complete(self, job: DocumentJob, where: Position, compiler: Callable[[], Compiler | None],
                       front_end: Callable[[], Compiler | None] = lambda: None,
                       sources: tuple[Source, ...] = ()) -> Completion:
        text, settings, judge, reader = job.text, job.settings, compiler(), front_end()
        ticket = self.host.ticket(job.key)
        future = self.host.submit(lambda model: complete_at(model, text, where, settings, cancel=ticket,
                                                            compiler=judge, front_end=reader, sources=sources))
        future.add_done_callback(lambda done: self._told_cancelled(job.key, done))
        try:
            return await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            ticket.cancel()
            raise

    def _told_cancelled(self, key: str, done: Any) -> None:
        if not done.cancelled() and isinstance(done.exception(), Cancelled):
            self.on_cancelled(f"{key}: {done.exception()}")

    def on_model_thread(self, job: Callable[[Any], T]) -> T:
        """Run `job` on the model's thread and wait for it (called from a worker thread, never the loop)."""
        return self.host.submit(job).result()

    async def in_thread(self, key: str, work: Callable[[Ticket], T]) -> T:
        """`work` on a worker thread under a fresh ticket for `key`; cancelled, the ticket is cancelled and
        the thread awaited (it stops at its next check) before `asyncio.CancelledError` goes on."""
        ticket = self.host.ticket(key)
        thread = asyncio.ensure_future(asyncio.to_thread(work, ticket))
        try:
            return await asyncio.shield(thread)
        except asyncio.CancelledError:
            ticket.cancel()
            with suppress(Exception):  # its `Cancelled`, or whatever it ended with: nobody waits for it now
                await thread
            raise

    async def optimize(self, job: DocumentJob, kernel: str) -> OptimizeReport:
        settings = job.settings
        unverified = None if settings.trusted else UNTRUSTED  # untrusted: its kernels never run on a GPU

        def work(ticket: Ticket) -> OptimizeReport:
            flags = job.flags()
            request = OptimizeRequest.from_settings(job.path, job.text, kernel, settings, flags,
                                                    unverified=unverified)
            return optimize(self.on_model_thread, request, checker(job.path.parent, flags, find_nvcc(settings.nvcc)),
                            ticket, job.said)

        return await self.in_thread(job.key, work)

    async def repair(self, job: DocumentJob) -> RepairResult:
        settings = job.settings

        def work(ticket: Ticket) -> RepairResult:
            check = checker(job.path.parent, job.flags(), find_nvcc(settings.nvcc))
            return repair(self.on_model_thread, job.text, check, settings.repair_rounds,
                          sampler=settings.sampler_config(), cancel=ticket, said=job.said,
                          budget_s=settings.repair_seconds)

        return await self.in_thread(job.key, work)

    async def can_bench(self, tell: Callable[[str], None]) -> bool:
        """Whether this machine has a GPU (looked up once; `tell` hears once that it has none)."""
        if self.has_gpu is None:
            async with self.gpu_lookup:  # saves in quick succession: one lookup, one message
                if self.has_gpu is None:
                    self.has_gpu = await asyncio.to_thread(gpu_arch) is not None
                    if not self.has_gpu:
                        tell(NO_GPU)
        return self.has_gpu

    async def bench(self, job: DocumentJob) -> BenchReport:
        return await asyncio.to_thread(bench_file, job.path, None, Limits(), job.flags(), job.said)

    async def close(self) -> None:
        """Nothing to let go: the model host outlives the settings (the server closes it at exit)."""


class TeamJobs:
    """A team server (`dice.server.url`): each job one request through `TeamServer`, its reply read back into
    the same typed result."""

    def __init__(self, team: TeamServer) -> None:
        self.team = team
        self.address = str(team.client.address)

    def start(self, settings: Settings) -> Starting:
        async def ready() -> str:
            await self.team.check()
            return "ready"

        return Starting(None, ready())

    async def ask(self, job: DocumentJob, method: str, params: dict[str, Any], read: Callable[[Any], T]) -> T:
        said = job.said
        listener = None if said is None else (lambda update: said(update["message"]))
        return read_reply(self.address, method, await self.team.ask(job.key, method, params, listener), read)

    async def complete(self, job: DocumentJob, where: Position, compiler: Callable[[], Compiler | None],
                       front_end: Callable[[], Compiler | None] = lambda: None,
                       sources: tuple[Source, ...] = ()) -> Completion:
        params: dict[str, Any] = {"text": job.text, "line": where.line, "character": where.character}
        found = proposals(job.text, where, sources)
        if found:
            params["proposals"] = found
        return await self.ask(job, "complete", params, lambda reply: Completion.from_json(reply, where))

    def files(self, job: DocumentJob, ref: Path | None = None) -> dict[str, Any]:
        """The document and its local headers as the request's files (no compilation database when the
        workspace is untrusted)."""
        request = file_request(job.path, job.text, ref)
        if not job.settings.trusted:
            request["files"] = without_databases(request["files"])
        return request

    async def optimize(self, job: DocumentJob, kernel: str) -> OptimizeReport:
        params = {"kernel": kernel} if job.settings.trusted else {"kernel": kernel, "trusted": False}
        return await self.ask(job, "optimize", {**self.files(job), **params}, OptimizeReport.from_json)

    async def repair(self, job: DocumentJob) -> RepairResult:
        return await self.ask(job, "repair", self.files(job), RepairResult.from_json)

    async def can_bench(self, tell: Callable[[str], None]) -> bool:
        return True  # the team server's GPU: it says itself when it has none

    async def bench(self, job: DocumentJob) -> BenchReport:
        reference = kernelbench_reference(job.path, job.text, None)
        sent = self.files(job, reference if reference is not None and reference.is_file() else None)
        return await self.ask(job, "bench", sent, BenchReport.from_json)

    async def close(self) -> None:
        await self.team.close()


def jobs_for(settings: Settings, local: LocalJobs, team: Callable[[Settings], TeamServer]) -> EditorJobs:
    """The team server of `dice.server.url` (a new link for these settings), else this machine."""
    return local if settings.server_url is None else TeamJobs(team(settings))


__all__ = ["DocumentJob", "EditorJobs", "LocalJobs", "Starting", "TeamJobs", "jobs_for"]
