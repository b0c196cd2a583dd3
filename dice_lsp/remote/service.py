"""What the team server does for each request, whatever carries it (`dice-lsp serve`, a Ray Serve replica).

The model lives on one `ModelHost` thread, which batches concurrent fills. A completion's Python work
(hole, context, tokens, then the checks of its fills) runs in a few worker processes that ask the model
for fills (`remote.completers`): done on threads, it would hold the GIL the model thread needs between
denoising steps, and every step would wait for it. Requests wait on a pool
with a thread per request in flight; benchmarks and optimizations take turns on one more thread, since
two timings sharing a GPU would disturb each other. Requests carry the source
text (and any local headers it needs as `files`), never paths on the server: each request that compiles
gets its own temporary folder.
Per-request settings are the `dice.*` keys that shape one request (sampler, flags, candidates); the model,
the device and nvcc are the server's. Every parameter is checked (types, finite numbers, and the operator's
`RequestLimits`: candidates, canvas, steps, request size, trials, timeout) before a request takes a place
in the queue: a token holder may use the server, not size it. A request's sources may name nothing on the
server but the toolkit (`remote.sources`), and every compile and run of its code happens in the sandbox the
server switched on at start (`dice_lsp.sandbox`; `status` says which).
A request's parameters are read once into typed values (`remote.requests`) before it is queued; the
handlers return typed results (`Reply`), which become the reply's JSON in one place (`Service.to_wire`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, TypeVar

from dice_lsp import __version__, sandbox
from dice_lsp.complete import Completion, no_completion
from dice_lsp.engine.fill_types import FillRequest, FillResult
from dice_lsp.errors import Cancelled, DiceError
from dice_lsp.harness.bench import BenchReport, bench_file
from dice_lsp.harness.limits import Limits
from dice_lsp.jobs import MAX_BATCH_ROWS
from dice_lsp.jobs.model_host import ModelHost, Ticket
from dice_lsp.jobs.status import ModelStatus
from dice_lsp.optimize import OptimizeReport, OptimizeRequest, RepairResult, checker, optimize, repair
from dice_lsp.optimize.repair import Check
from dice_lsp.remote.completers import Completers
from dice_lsp.remote.limits import MAX_PENDING, RequestLimits, check_params, check_settings
from dice_lsp.remote.protocol import RemoteError
from dice_lsp.remote.requests import (
    BenchParams,
    CheckParams,
    CompleteParams,
    FillParams,
    OptimizeParams,
    Params,
    RepairParams,
    Sources,
    read_params,
)
from dice_lsp.remote.sources import check_folders, check_reference, check_sources
from dice_lsp.settings import SERVER_OWNED, UNTRUSTED, Settings, editor_key
from dice_lsp.toolchain.cache import CompileCache
from dice_lsp.toolchain.flags import CompileFlags, flags_for
from dice_lsp.toolchain.nvcc import find_nvcc
from dice_lsp.toolchain.report import CheckReport, check_source
from dice_lsp.toolchain.scratch import run_folder
from dice_lsp.wording import Said

if TYPE_CHECKING:  # torch loads with the model, not with this module
    from dice_lsp.engine import LoadedModel

T = TypeVar("T")
Reply = Completion | FillResult | CheckReport | BenchReport | OptimizeReport | RepairResult  # a handler's result
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
        self.loading: asyncio.Future[None] | None = None
        self.completers: Completers | None = None
        self.in_flight = 0
        self.served = 0
        self.started = time.time()
        self.cache = CompileCache()

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
            handler = getattr(self, f"_{method}")
            pool = self.gpu if method in ("bench", "optimize") else self.pool
            result = await asyncio.wrap_future(pool.submit(handler, request, ticket, progress))
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

    def to_wire(self, result: Reply) -> dict[str, Any]:
        """A handler's typed result as the reply's JSON (a completion names the model that wrote it)."""
        if isinstance(result, Completion):
            return result.to_json(self.host.model())
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

    def read(self, method: str, params: dict[str, Any]) -> Params:
        """The request's parameters (checked by `check_params`) and merged settings as typed values."""
        settings = self.settings_for(params, method)
        try:
            return read_params(method, params, settings, self.config.limits)
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

    def _run_model(self, job: Callable[[LoadedModel], T]) -> T:
        return self.host.submit(job).result()

    def _complete(self, request: CompleteParams, ticket: Ticket, _progress: Said) -> Completion:
        started = time.perf_counter()
        self.host.model()  # "no model: why" when it did not load
        assert self.completers is not None
        check_sources({"kernel.cu": request.text}, self._toolkit(request.settings))  # clang reads what it names
        completion = self.completers.complete(request.text, request.position, request.settings, request.selection,
                                              started, lambda fill: self.host.fill(fill, ticket).result(),
                                              request.proposals)
        return completion or no_completion(request.position, started)

    def _fill(self, request: FillParams, ticket: Ticket, _progress: Said) -> FillResult:
        settings = request.settings
        fill = FillRequest(request.prefix, request.suffix, request.max_tokens, settings.candidates,
                           settings.sampler_config(request.max_tokens))
        return self.host.fill(fill, ticket).result()

    def _check(self, request: CheckParams, _ticket: Ticket, _progress: Said) -> CheckReport:
        with workspace(request.sources, request.settings) as sent:
            return check_source(sent.text, sent.path.parent, sent.flags, cache=self.cache, nvcc=sent.nvcc)

    def _bench(self, request: BenchParams, _ticket: Ticket, progress: Said) -> BenchReport:
        with workspace(request.sources, request.settings) as sent:
            return bench_file(sent.path, sent.ref, request.limits, sent.flags, progress)

    def _optimize(self, request: OptimizeParams, ticket: Ticket, progress: Said) -> OptimizeReport:
        with workspace(request.sources, request.settings) as sent:
            optimizing = OptimizeRequest.from_settings(
                sent.path, sent.text, request.kernel, request.settings, sent.flags, ref=sent.ref,
                limits=Limits(timeout=request.timeout), unverified=None if request.trusted else UNTRUSTED)
            return optimize(self._run_model, optimizing, sent.check, ticket, progress)

    def _repair(self, request: RepairParams, ticket: Ticket, progress: Said) -> RepairResult:
        settings = request.settings
        with workspace(request.sources, settings) as sent:
            return repair(self._run_model, sent.text, sent.check, settings.repair_rounds, request.candidates,
                          settings.sampler_config(), ticket, progress, settings.repair_seconds)


def log_status(status: ModelStatus) -> None:
    LOG.info("model: %s", " ".join(f"{k}={v}" for k, v in status.to_json().items()))


def _relative(name: str) -> PurePosixPath:
    path = PurePosixPath(name)
    if not name or path.is_absolute() or ".." in path.parts:
        raise RemoteError("bad_params", f"{name!r} must be a relative path inside the request's folder")
    return path


@dataclass(frozen=True)
class SentFile:
    """A request's file in its temporary folder, and what compiling it there takes."""

    path: Path
    text: str
    ref: Path | None  # the reference the request named among its `files`
    flags: CompileFlags
    nvcc: Path

    @property
    def check(self) -> Check:
        return checker(self.path.parent, self.flags, self.nvcc)


@contextmanager
def workspace(sources: Sources, settings: Settings) -> Iterator[SentFile]:
    """A temporary folder holding the request's file (`path`, `text`) and its `files` (local headers, a
    reference), compiled with `settings`; removed afterwards."""
    name, text = sources.path, sources.text
    sent = {**sources.files, name: text}
    nvcc = find_nvcc(settings.nvcc)
    check_sources(sent, sandbox.toolkit_roots(nvcc))
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
        yield SentFile(path, text, ref, flags, nvcc)
