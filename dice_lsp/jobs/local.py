"""The jobs on this machine (`jobs.api.Jobs`): the model on the model host's thread, nvcc and the GPU on worker
threads.

One implementation for every caller: the language server (its host, loaded from the editor's settings by
`start`), the command line (a host of its own: the model is loaded without a warm-up the first time a job
needs it, and its load error is that job's) and the team server's service (its host and its pools: benchmarks
and optimizations take turns on one GPU thread, since two timings sharing a GPU would disturb each other, and
its completions are prepared in worker processes: `completer`). A job with a key gets the host's ticket for
it, so a newer job for the same document cancels the older one between two denoising steps.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import Executor, Future
from contextlib import suppress
from typing import TYPE_CHECKING, Any, TypeVar

from dice_lsp.errors import Cancelled, DiceError
from dice_lsp.jobs.api import Completed, Defaults, Starting
from dice_lsp.jobs.model_host import ModelHost, Ticket
from dice_lsp.settings import UNTRUSTED, Settings

if TYPE_CHECKING:
    from dice_lsp.complete import Completion
    from dice_lsp.engine import LoadedModel
    from dice_lsp.harness.bench import BenchReport
    from dice_lsp.jobs.api import BenchJob, CheckJob, CompleteJob, Document, OptimizeJob, RepairJob
    from dice_lsp.optimize import OptimizeReport, RepairResult
    from dice_lsp.optimize.repair import Check
    from dice_lsp.toolchain.cache import CompileCache
    from dice_lsp.toolchain.flags import CompileFlags
    from dice_lsp.toolchain.report import CheckReport

T = TypeVar("T")
NO_GPU = "dice-lsp: no CUDA GPU here; benchmarks on save are off"
STOP_S = 60.0  # longest wait, on closing a host of their own, for the model thread (a shard being read)
Completer = Callable[["CompleteJob", Ticket], "Completion"]  # a completion made on a worker thread (its ticket given)


class LocalJobs:
    """This machine's jobs. `model`: the model to load when a job first needs one and nobody loaded one (the
    command line's); `on_cancelled` hears (from the model's thread) how far a fill replaced by a newer one got;
    `threads` and `gpu` run the jobs' work (None: the event loop's default executor); `completer` makes
    completions on a worker thread instead of on the model's thread; `defaults` fill what a job leaves out."""

    def __init__(self, host: ModelHost, *, model: Settings | None = None,
                 on_cancelled: Callable[[str], None] | None = None, threads: Executor | None = None,
                 gpu: Executor | None = None, completer: Completer | None = None,
                 defaults: Defaults | None = None) -> None:
        from dice_lsp.toolchain.cache import CompileCache

        self.host, self.model, self.on_cancelled = host, model, on_cancelled
        self.threads, self.gpu, self.completer = threads, gpu, completer
        self.defaults = defaults or Defaults()
        self.cache = CompileCache()
        self.has_gpu: bool | None = None  # looked up on the first benchmark
        self.gpu_lookup = asyncio.Lock()
        self.loading = asyncio.Lock()
        self.own_host = False  # `close` closes the host (made for these jobs alone: `of_model`)

    @classmethod
    def of_model(cls, settings: Settings) -> LocalJobs:
        """Jobs with a model host of their own, whose model (`settings`') loads the first time a job needs it."""
        jobs = cls(ModelHost(lambda _status: None), model=settings)
        jobs.own_host = True
        return jobs

    def start(self, settings: Settings) -> Starting:
        """Load the model of `settings` in the background (the current one serves until then)."""
        loading = asyncio.wrap_future(self.host.load(settings))

        async def ready() -> str:
            await loading
            return self.host.status.state

        return Starting(f"loading {settings.model or 'dice-tiny'}", ready())

    async def loaded(self) -> None:
        """The model of `model` loaded now if no model was ever asked for; its load error is a DiceError."""
        if self.model is None or self.host.status.state != "idle":
            return
        async with self.loading:
            if self.host.status.state == "idle":
                await asyncio.wrap_future(self.host.load(self.model, warm=False))
        loaded = self.host.status
        if loaded.state == "error":
            raise DiceError(loaded.message or "the model did not load")

    def ticket(self, key: str) -> Ticket:
        """The host's ticket for `key` (a newer one cancels it), or one of its own for a job without a key."""
        return self.host.ticket(key) if key else Ticket()

    async def complete(self, job: CompleteJob) -> Completed:
        await self.loaded()
        document = job.document
        if self.completer is not None:
            completer = self.completer
            completion = await self.in_thread(document.key, lambda ticket: completer(job, ticket), self.threads)
        else:
            ticket = self.ticket(document.key)
            completion = await self.on_model(document.key, ticket, self.completing(job, ticket))
        model = self.host.model()
        return Completed(completion, model.name, str(model.device), f"{completion.model_calls} model calls",
                         completion.to_json(model))

    @staticmethod
    def completing(job: CompleteJob, ticket: Ticket) -> Callable[[LoadedModel], Completion]:
        """The completion of `job` on the model's thread, its judges made now (on the caller's thread)."""
        from dice_lsp.complete import complete_at

        document, judge, reader = job.document, job.compiler(), job.front_end()
        said = document.said
        progress = None if said is None else (lambda calls: said(f"denoising: {calls} model calls"))
        return lambda model: complete_at(model, document.text, settings=document.settings, cancel=ticket,
                                         progress=progress, compiler=judge, front_end=reader, **job.arguments())

    async def on_model(self, key: str, ticket: Ticket, work: Callable[[LoadedModel], T]) -> T:
        """`work` on the model's thread; cancelled, its ticket is cancelled (the fill stops at its next step)."""
        future = self.host.submit(work)
        future.add_done_callback(lambda done: self.told_cancelled(key, done))
        try:
            return await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            ticket.cancel()
            raise

    def told_cancelled(self, key: str, done: Future[Any]) -> None:
        if self.on_cancelled is not None and not done.cancelled() and isinstance(done.exception(), Cancelled):
            self.on_cancelled(f"{key}: {done.exception()}")

    def on_model_thread(self, job: Callable[[LoadedModel], T]) -> T:
        """Run `job` on the model's thread and wait for it (called from a worker thread, never the loop)."""
        return self.host.submit(job).result()

    async def in_thread(self, key: str, work: Callable[[Ticket], T], executor: Executor | None = None) -> T:
        """`work` on a worker thread under a fresh ticket for `key`; cancelled, the ticket is cancelled and the
        thread awaited (it stops at its next check) before `asyncio.CancelledError` goes on."""
        ticket = self.ticket(key)
        thread = asyncio.get_running_loop().run_in_executor(executor, work, ticket)
        try:
            return await asyncio.shield(thread)
        except asyncio.CancelledError:
            ticket.cancel()
            with suppress(Exception):  # its `Cancelled`, or whatever it ended with: nobody waits for it now
                await thread
            raise

    async def check(self, job: CheckJob) -> CheckReport:
        from dice_lsp.toolchain.nvcc import find_nvcc
        from dice_lsp.toolchain.report import check_source

        document = job.document

        def work(_ticket: Ticket) -> CheckReport:
            return check_source(document.text, document.path.parent, document.flags(), cache=self.cache,
                                nvcc=find_nvcc(document.settings.nvcc), **job.arguments(self.defaults))

        return await self.in_thread(document.key, work, self.threads)

    async def can_bench(self, tell: Callable[[str], None]) -> bool:
        """Whether this machine has a GPU (looked up once; `tell` hears once that it has none)."""
        from dice_lsp.harness.bench import gpu_arch

        if self.has_gpu is None:
            async with self.gpu_lookup:  # saves in quick succession: one lookup, one message
                if self.has_gpu is None:
                    self.has_gpu = await asyncio.to_thread(gpu_arch) is not None
                    if not self.has_gpu:
                        tell(NO_GPU)
        return self.has_gpu

    async def bench(self, job: BenchJob) -> BenchReport:
        from dice_lsp.harness.bench import bench_file

        document, arguments = job.document, job.arguments(self.defaults)

        def work(_ticket: Ticket) -> BenchReport:
            return bench_file(document.path, document.ref, flags=document.flags(), progress=document.said, **arguments)

        return await self.in_thread(document.key, work, self.gpu)

    async def optimize(self, job: OptimizeJob) -> OptimizeReport:
        """Untrusted, the rewrites are compiled and ranked but never run on a GPU."""
        from dice_lsp.optimize import OptimizeRequest, optimize

        await self.loaded()
        document, settings = job.document, job.document.settings

        def work(ticket: Ticket) -> OptimizeReport:
            flags, unverified = document.flags(), None if settings.trusted else UNTRUSTED
            request = OptimizeRequest.from_settings(document.path, document.text, settings=settings, flags=flags,
                                                    ref=document.ref, unverified=unverified,
                                                    **job.arguments(self.defaults))
            return optimize(self.on_model_thread, request, compiling(document, flags, self.cache), ticket,
                            document.said)

        return await self.in_thread(document.key, work, self.gpu)

    async def repair(self, job: RepairJob) -> RepairResult:
        from dice_lsp.optimize import repair

        await self.loaded()
        document, settings = job.document, job.document.settings

        def work(ticket: Ticket) -> RepairResult:
            check = compiling(document, document.flags(), self.cache)
            return repair(self.on_model_thread, document.text, check, rounds=settings.repair_rounds,
                          sampler=settings.sampler_config(), cancel=ticket, said=document.said,
                          budget_s=settings.repair_seconds, **job.arguments(self.defaults))

        return await self.in_thread(document.key, work, self.threads)

    async def close(self) -> None:
        """A host of their own is closed (its thread waited for: see `ModelHost.close`); another outlives these
        jobs, and whoever made it closes it."""
        if self.own_host and not await asyncio.to_thread(self.host.close, STOP_S):
            raise DiceError(f"the model thread is still busy after {STOP_S:.0f} s")


def compiling(document: Document, flags: CompileFlags, cache: CompileCache | None = None) -> Check:
    """nvcc's report on a rewrite of `document`, compiled beside it with `flags` (answered from `cache` when
    compiled before)."""
    from dice_lsp.optimize import checker
    from dice_lsp.toolchain.nvcc import find_nvcc

    return checker(document.path.parent, flags, find_nvcc(document.settings.nvcc), cache)


__all__ = ["NO_GPU", "Completer", "LocalJobs", "compiling"]
