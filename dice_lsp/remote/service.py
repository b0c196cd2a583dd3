"""What the team server does for each request, whatever carries it (`dice-lsp serve`, a Ray Serve replica).

A request is read once into its job (`remote.requests`), then run through `jobs.local.LocalJobs`, the jobs a
command or an editor runs on this machine: the job is written once, and only how the server holds its work
differs. The model lives on one `ModelHost` thread, which batches concurrent fills. A completion's Python work
(hole, context, tokens, then the checks of its fills) runs in a few worker processes that ask the model
for fills (`remote.completers`): done on threads, it would hold the GIL the model thread needs between
denoising steps, and every step would wait for it. Requests wait on a pool
with a thread per request in flight; benchmarks and optimizations take turns on one more thread, since
two timings sharing a GPU would disturb each other. Requests carry the source
text (and any local headers it needs as `files`), never paths on the server: each request that compiles
gets its own temporary folder, its document (`workspace`).
Per-request settings are the `dice.*` keys that shape one request (sampler, flags, candidates); the model,
the device and nvcc are the server's. Every parameter is checked (types, finite numbers, and the operator's
`RequestLimits`: candidates, canvas, steps, request size, trials, timeout) before a request takes a place
in the queue: a token holder may use the server, not size it; what a request leaves out gets the runner's
default within those limits. A request's sources may name nothing on the
server but the toolkit (`remote.sources`), and every compile and run of its code happens in the sandbox the
server switched on at start (`dice_lsp.sandbox`; `status` says which).
The jobs answer typed results (`Reply`), which become the reply's JSON in one place (`Service.to_wire`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from dice_lsp import __version__, sandbox
from dice_lsp.complete import Completion, no_completion
from dice_lsp.completion.sources import Proposed
from dice_lsp.engine.fill_types import FillRequest, FillResult
from dice_lsp.errors import Cancelled, DiceError
from dice_lsp.harness.bench import BenchReport
from dice_lsp.jobs import MAX_BATCH_ROWS
from dice_lsp.jobs.api import Completed, CompleteJob, Document, Job
from dice_lsp.jobs.local import LocalJobs
from dice_lsp.jobs.model_host import ModelHost, Ticket
from dice_lsp.jobs.status import ModelStatus
from dice_lsp.optimize import OptimizeReport, RepairResult
from dice_lsp.remote.completers import Completers
from dice_lsp.remote.limits import MAX_PENDING, RequestLimits, check_params, check_settings
from dice_lsp.remote.protocol import RemoteError
from dice_lsp.remote.requests import FillParams, Received, Sources, defaults_within, read_params
from dice_lsp.remote.sources import check_folders, check_reference, check_sources
from dice_lsp.settings import SERVER_OWNED, Settings, editor_key
from dice_lsp.toolchain.flags import flags_for
from dice_lsp.toolchain.nvcc import find_nvcc
from dice_lsp.toolchain.report import CheckReport
from dice_lsp.toolchain.scratch import run_folder
from dice_lsp.wording import Said

Reply = Completed | FillResult | CheckReport | BenchReport | OptimizeReport | RepairResult  # what a request answers
LOG = logging.getLogger("dice_lsp.serve")


@dataclass(frozen=True)
class ServiceConfig:
    settings: Settings  # the model and defaults requests start from
    max_pending: int = MAX_PENDING  # requests in flight at once; more are answered "busy"
    max_batch_rows: int = MAX_BATCH_ROWS  # rows of one denoising batch (1: no batching)
    limits: RequestLimits = field(default_factory=RequestLimits)  # the most one request may ask for


class Service:
    def __init__(self, config: ServiceConfig) -> None:
        self.config = config
        self.host = ModelHost(log_status, config.max_batch_rows)
        self.pool = ThreadPoolExecutor(config.max_pending, thread_name_prefix="dice-work")
        self.gpu = ThreadPoolExecutor(1, thread_name_prefix="dice-gpu")
        self.jobs = LocalJobs(self.host, threads=self.pool, gpu=self.gpu, completer=self.completion,
                              defaults=defaults_within(config.limits))
        self.loading: asyncio.Future[None] | None = None
        self.completers: Completers | None = None
        self.in_flight = 0
        self.served = 0
        self.started = time.time()

    def start(self) -> None:
        """Load the model, then start the processes that complete (with its tokenizer)."""
        self.host.load(self.config.settings).result()
        if self.host.status.state != "ready":
            return  # requests are answered with the load error
        model = self.host.model()
        self.completers = Completers(model.tokenizer.folder, model.window)

    def load(self) -> asyncio.Future[None]:
        """`start` in the background; requests that need the model wait for it."""
        self.loading = asyncio.wrap_future(self.pool.submit(self.start))
        return self.loading

    def close(self) -> None:
        self.host.close()
        for pool in (self.pool, self.gpu):
            pool.shutdown(wait=False, cancel_futures=True)
        if self.completers is not None:
            self.completers.close()

    async def call(self, method: str, params: dict[str, Any], ticket: Ticket, progress: Said) -> Any:
        """Answer one request; RemoteError for what the client did wrong or when the server is full."""
        if method == "status":
            return self.status()
        check_params(method, params, self.config.limits)
        request = self.read(method, params)  # refused here, before the request takes a place in the queue
        if self.in_flight >= self.config.max_pending:
            raise RemoteError("busy", f"the server is busy ({self.in_flight} requests in flight); try again")
        self.in_flight += 1
        try:
            if self.loading is not None:
                await asyncio.shield(self.loading)
            result = await self.answer(request, ticket, progress)
        except asyncio.CancelledError:
            ticket.cancel()
            raise
        except Cancelled as exc:
            raise RemoteError("cancelled", str(exc)) from exc
        except (KeyError, TypeError, ValueError, OverflowError) as exc:
            raise RemoteError("bad_params", f"{method}: bad or missing parameter ({exc})") from exc
        finally:
            self.in_flight -= 1
        self.served += 1
        return self.to_wire(result)

    async def answer(self, request: Received | FillParams, ticket: Ticket, progress: Said) -> Reply:
        """A raw fill on the model; a job on its document, through the jobs (the method names the job)."""
        if isinstance(request, FillParams):
            return await asyncio.wrap_future(self.pool.submit(self._fill, request, ticket))
        if request.method == "complete":  # the text alone, prepared in the worker processes: no folder
            settings = request.settings
            return await self.run(request, Document(Path(request.sources.path), request.sources.text, settings,
                                                    lambda: settings.compile_flags(Path.cwd()), said=progress))
        with workspace(request.sources, request.settings, progress) as document:
            return await self.run(request, document)

    async def run(self, request: Received, document: Document) -> Reply:
        run: Callable[[Job], Awaitable[Reply]] = getattr(self.jobs, request.method)  # the method names the job
        return await run(request.job(document))

    def to_wire(self, result: Reply) -> dict[str, Any]:
        """A job's typed result as the reply's JSON (a completion names the model that wrote it)."""
        if isinstance(result, Completed):
            return result.json
        if isinstance(result, FillResult):
            return {"texts": result.texts, "model_calls": result.model_calls}
        return result.to_json()

    def status(self) -> dict[str, Any]:
        host = self.host
        return {**host.status.to_json(), "version": __version__, "in_flight": self.in_flight, "queued": host.pending,
                "served": self.served, "fills": host.fills, "fill_batches": host.fill_batches,
                "fill_steps": host.fill_steps, "step_rows": host.step_rows,
                "completion_time": self.completers.timing.to_json() if self.completers is not None else None,
                "uptime_s": round(time.time() - self.started, 1), "sandbox": sandbox.mode(),
                "limits": self.config.limits.to_json()}

    def read(self, method: str, params: dict[str, Any]) -> Received | FillParams:
        """The request's parameters (checked by `check_params`) and merged settings as typed values."""
        settings = self.settings_for(params, method)
        try:
            return read_params(method, params, settings)
        except (KeyError, TypeError, ValueError, OverflowError) as exc:
            raise RemoteError("bad_params", f"{method}: bad or missing parameter ({exc})") from exc

    def settings_for(self, params: dict[str, Any], method: str = "request") -> Settings:
        raw = params.get("settings") or {}
        if not isinstance(raw, dict):
            raise RemoteError("bad_params", "settings must be a map of dice.* keys")
        settings, errors = self.config.settings.updated(raw)
        if errors:
            raise RemoteError("bad_params", errors[0])
        owned = [name for name in SERVER_OWNED if getattr(settings, name) != getattr(self.config.settings, name)]
        if owned:
            raise RemoteError("bad_params", f"dice.{editor_key(owned[0])} is chosen by the server, not per request")
        check_settings(method, settings, self.config.limits)
        return settings

    @staticmethod
    def _toolkit(settings: Settings) -> tuple[Path, ...]:
        """The folders of the server's CUDA toolkit (what an absolute `#include` may name); none without nvcc."""
        try:
            return sandbox.toolkit_roots(find_nvcc(settings.nvcc))
        except DiceError:
            return ()

    def completion(self, job: CompleteJob, ticket: Ticket) -> Completion:
        """A completion prepared in the worker processes, its fills batched on the model's thread with the
        other requests' (`LocalJobs`' completer, on a pool thread)."""
        started = time.perf_counter()
        self.host.model()  # "no model: why" when it did not load
        assert self.completers is not None
        document, settings = job.document, job.document.settings
        check_sources({"kernel.cu": document.text}, self._toolkit(settings))  # clang reads what it names
        proposed = tuple(c for source in job.sources if isinstance(source, Proposed) for c in source.found)
        completion = self.completers.complete(document.text, job.position, settings, job.selection, started,
                                              lambda fill: self.host.fill(fill, ticket).result(), proposed)
        return completion or no_completion(job.position, started)

    def _fill(self, request: FillParams, ticket: Ticket) -> FillResult:
        settings = request.settings
        fill = FillRequest(request.prefix, request.suffix, request.max_tokens, settings.candidates,
                           settings.sampler_config(request.max_tokens))
        return self.host.fill(fill, ticket).result()


def log_status(status: ModelStatus) -> None:
    LOG.info("model: %s", " ".join(f"{k}={v}" for k, v in status.to_json().items()))


def _relative(name: str) -> PurePosixPath:
    path = PurePosixPath(name)
    if not name or path.is_absolute() or ".." in path.parts:
        raise RemoteError("bad_params", f"{name!r} must be a relative path inside the request's folder")
    return path


@contextmanager
def workspace(sources: Sources, settings: Settings, said: Said) -> Iterator[Document]:
    """A temporary folder holding the request's file (`path`, `text`) and its `files` (local headers, a
    reference), as the document of its job, compiled with `settings`; removed afterwards."""
    name, text = sources.path, sources.text
    sent = {**sources.files, name: text}
    check_sources(sent, sandbox.toolkit_roots(find_nvcc(settings.nvcc)))
    check_reference(name, text, sources.ref, list(sources.files))
    with run_folder("serve") as folder:
        root = Path(folder)
        for key, content in sent.items():
            target = root / _relative(key)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content, encoding="utf-8")
        path = root / _relative(name)
        ref = root / _relative(sources.ref) if sources.ref else None
        flags = flags_for(path, settings.compile_flags(path.parent), root)
        check_folders(flags, root)
        yield Document(path, text, settings, lambda: flags, ref=ref, said=said)
