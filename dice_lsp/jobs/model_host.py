"""One thread owns the model: it loads it, then runs generations, batching the fills that can share a batch.

The language server's event loop never touches the model. A request gets a `Ticket`; a newer request
for the same document cancels the older ticket, and the denoising loop checks it before every model call,
so stale work stops within one step. Loading and generations share the thread, so a completion asked
for while the model loads simply waits for it.

Fills are scheduled a denoising step at a time (`engine.continuous`): the oldest queued fill starts a run at
once (a lone request never waits), and between steps every queued fill the run's scheduler takes joins it (up to
`max_batch_rows` rows; one queue key for them all, whatever their region sizes and samplers), from the head of
the queue up to the first job of another kind. A fill that runs alone (a re-masking round's draft of an in-place
fill) at the head of the queue is run between two steps; a model job waits for the run to drain, never for fills
queued after it. A fill leaves, and is answered, at the step that finishes it; a cancelled ticket's rows leave
at the next step, the others' tokens untouched: a late fill costs one step's delay, not a batch's. A
block-diffusion checkpoint's fills and drafts (SDAR/DICE) join the same way (`engine.block_scheduler`: each row
at its own block and positions), and a queued fill that does not fit the running batch's rows and columns
(`fits`) waits at the head of the queue. Fills of other models batch the queued fills whole (`fill_batch`); a
host of one row runs every fill alone (`fill`).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from dice_lsp import engine
from dice_lsp.errors import Cancelled, DiceError
from dice_lsp.jobs import MAX_BATCH_ROWS
from dice_lsp.jobs.status import ModelStatus
from dice_lsp.settings import Settings

if TYPE_CHECKING:  # the engine (torch) is imported when the model loads, not when a server starts
    from dice_lsp.engine import FillRequest, FillResult, LoadedModel
    from dice_lsp.engine.block_scheduler import BlockFill, BlockScheduler
    from dice_lsp.engine.continuous import FillScheduler, Stream

T = TypeVar("T")
StatusListener = Callable[[ModelStatus], None]


class Ticket:
    """A cancellation flag for one request; callable as the engine's cancel check."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def cancel(self) -> None:
        self._event.set()

    def __call__(self) -> bool:
        return self._event.is_set()

    def wait(self, timeout: float) -> bool:
        """Block until the ticket is cancelled or `timeout` seconds pass; whether it was cancelled."""
        return self._event.wait(timeout)


@dataclass
class _Job:
    future: Future[Any]
    run: Callable[[], Any] | None = None  # a model job, or a fill when None
    fill: FillRequest | None = None
    ticket: Ticket = field(default_factory=Ticket)
    key: object = None  # the fill's batch key (None: it runs alone)
    rows: int = 0  # the rows of a denoising batch the fill takes (`engine.batch_rows`)


class ModelHost:
    def __init__(self, on_status: StatusListener, max_batch_rows: int = MAX_BATCH_ROWS) -> None:
        self._on_status = on_status
        self._max_rows = max_batch_rows
        self._model: LoadedModel | None = None
        self._error: str | None = None
        self._tickets: dict[str, Ticket] = {}
        self._lock = threading.Lock()
        self._ready = threading.Condition(self._lock)
        self._queue: deque[_Job] = deque()
        self._closed = False
        self.status = ModelStatus("idle")
        self.fills = self.fill_batches = 0  # fills taken, and the batches (scheduler runs) they took part in
        self.fill_steps = self.step_rows = 0  # batched fills' model calls, and the rows they carried
        self._block_peak = 1  # the most rows the last block-diffusion run held at once (its successor's spare rows)
        self._thread = threading.Thread(target=self._serve, name="dice-model", daemon=True)
        self._thread.start()

    def _set_status(self, status: ModelStatus) -> None:
        self.status = status
        self._on_status(status)

    def load(self, settings: Settings, warm: bool = True) -> Future[None]:
        """Replace the model in the background (the current one serves until then); `warm`: then make one
        completion, so that the first one asked for finds the model's kernels made (a one-shot command does
        without)."""
        self._set_status(ModelStatus("loading", settings.model or "dice-tiny"))

        def work() -> None:
            try:
                model = load_model(settings.model, settings.device, settings.dtype, settings.trust_remote_code)
            except DiceError as exc:
                self._model, self._error = None, str(exc)
                self._set_status(ModelStatus.failed(settings.model or "dice-tiny", str(exc)))
                return
            if warm:
                from dice_lsp.complete import warm_up

                warm_up(model, settings, self._stepwise_filler(model))
            self._model, self._error = model, None
            dtype = "int8" if model.int8 else str(model.dtype)
            self._set_status(ModelStatus.ready(model.name, str(model.device), dtype))

        return self._enqueue(_Job(Future(), run=work))

    def _stepwise_filler(self, model: LoadedModel) -> Callable[[FillRequest], FillResult] | None:
        """For the warm-up of a batching host: a fill run through the step scheduler its fills take, on this
        thread (its shapes, kernels and CUDA graphs are made then, not in the first editor's completion: a
        lone editor of a batching SDAR-8B server answered 11-14% slower than of an unbatched one, mostly in its
        first seconds); None where fills run whole."""
        if self._max_rows <= 1:
            return None

        def fill(request: FillRequest) -> FillResult:
            if not _supports(model, request):
                return engine.fill(model, request)
            scheduler = _scheduler(model, self._max_rows, 1)
            admitted = scheduler.admit(request)
            while scheduler.busy:
                scheduler.step()
            if admitted.error is not None:
                raise admitted.error
            assert admitted.result is not None
            return admitted.result

        return fill

    def ticket(self, key: str) -> Ticket:
        """A new ticket for `key` (a document); the previous one for it is cancelled."""
        ticket = Ticket()
        with self._lock:
            previous = self._tickets.get(key)
            self._tickets[key] = ticket
        if previous is not None:
            previous.cancel()
        return ticket

    def submit(self, job: Callable[[LoadedModel], T]) -> Future[T]:
        """Run `job` with the model on the model's thread, after the jobs queued before it."""
        return self._enqueue(_Job(Future(), run=lambda: job(self.model())))

    def fill(self, request: FillRequest, ticket: Ticket) -> Future[FillResult]:
        """Fill `request`, batched with the other queued fills of its shape; `ticket` cancels it."""
        model = self._model
        key = _key(model, request) if model is not None else None
        rows = engine.batch_rows(model, request) if model is not None else request.rows
        return self._enqueue(_Job(Future(), fill=request, ticket=ticket, key=key, rows=rows))

    @property
    def pending(self) -> int:
        """Jobs waiting for the model."""
        return len(self._queue)

    def model(self) -> LoadedModel:
        """The loaded model (its tokenizer and window prepare requests on other threads), or a DiceError."""
        if self._model is None:
            raise DiceError(f"no model: {self._error or 'not loaded'}")
        return self._model

    def _enqueue(self, job: _Job) -> Future[Any]:
        with self._lock:
            if self._closed:
                raise DiceError("the model host is closed")
            self._queue.append(job)
            self._ready.notify()
        return job.future

    def _next(self) -> list[_Job] | None:
        """The oldest job, with the queued fills that share its batch; None once closed."""
        with self._lock:
            while not self._queue and not self._closed:
                self._ready.wait()
            if self._closed:
                return None
            first = self._queue.popleft()
            if first.key is None or first.fill is None:
                return [first]
            return [first, *self._take_fills(first.key, first.rows)]

    def _take_fills(self, key: object, rows: int, fits: Callable[[FillRequest], bool] | None = None) -> list[_Job]:
        """From the head of the queue, the fills with `key` that fit beside `rows` rows and pass `fits` (a
        running block batch's room; lock held)."""
        taken: list[_Job] = []
        while self._queue and self._queue[0].key == key and self._queue[0].fill is not None:
            if rows + self._queue[0].rows > self._max_rows or (fits is not None and not fits(self._queue[0].fill)):
                break
            taken.append(self._queue.popleft())
            rows += taken[-1].rows
        return taken

    def _take_lone(self) -> list[_Job]:
        """The fill at the head of the queue when it runs alone (no batch key: a draft of an in-place fill), for a
        step-wise run to answer between its steps (lock held)."""
        if self._queue and self._queue[0].fill is not None and self._queue[0].key is None:
            return [self._queue.popleft()]
        return []

    def _serve(self) -> None:
        while (batch := self._next()) is not None:
            jobs = [job for job in batch if job.future.set_running_or_notify_cancel()]
            if not jobs:
                continue
            first = jobs[0]
            if first.fill is not None and first.key is not None and self._max_rows > 1 and self._model is not None \
                    and _supports(self._model, first.fill):
                self._run_stepwise(self._model, jobs)
                continue
            self._answer(jobs)

    def _answer(self, jobs: list[_Job]) -> None:
        """Run `jobs` (one model job, or fills of one batch) and hand each its result or the error."""
        try:
            results = self._work(jobs)
        except BaseException as exc:  # every waiter learns why; the thread goes on
            for job in jobs:
                job.future.set_exception(exc)
            return
        for job, result in zip(jobs, results, strict=True):
            if job.ticket():  # cancelled while its batch ran on for the others
                job.future.set_exception(Cancelled("cancelled"))
            else:
                job.future.set_result(result)

    def _run_stepwise(self, model: LoadedModel, jobs: list[_Job]) -> None:
        """Run fills step by step until none is left, admitting the queued fills of their key between steps."""
        scheduler = _scheduler(model, self._max_rows, self._block_peak)
        self.fill_batches += 1
        owners: dict[Stream | BlockFill, _Job] = {}
        while True:
            for job in jobs:
                assert job.fill is not None
                self.fills += 1
                try:
                    owners[scheduler.admit(job.fill, job.ticket)] = job
                except DiceError as exc:
                    job.future.set_exception(exc)
            if not scheduler.busy:
                self._block_peak = getattr(scheduler, "peak_rows", self._block_peak)
                return
            calls, rows = scheduler.calls, scheduler.row_steps
            try:
                left = scheduler.step()
            except BaseException as exc:  # every waiter learns why; the thread goes on
                for job in owners.values():
                    job.future.set_exception(exc)
                return
            self.fill_steps += scheduler.calls - calls
            self.step_rows += scheduler.row_steps - rows
            for stream in left:
                job = owners.pop(stream)
                if stream.error is not None:
                    job.future.set_exception(stream.error)
                elif job.ticket():
                    job.future.set_exception(Cancelled("cancelled"))
                else:
                    job.future.set_result(stream.result)
            with self._lock:
                taken = [] if self._closed else self._take_fills(scheduler.key, scheduler.rows, scheduler.fits)
                lone = [] if self._closed or taken else self._take_lone()
            for job in lone:  # a re-masking round's draft, say: run between steps, not after the batch drains
                if job.future.set_running_or_notify_cancel():
                    self._answer([job])
            jobs = [job for job in taken if job.future.set_running_or_notify_cancel()]

    def _work(self, jobs: list[_Job]) -> list[Any]:
        first = jobs[0]
        if first.run is not None:
            return [first.run()]
        model = self.model()
        requests = [job.fill for job in jobs if job.fill is not None]
        self.fills += len(requests)
        self.fill_batches += 1
        if first.key is None:
            return [engine.fill(model, requests[0], first.ticket)]
        results = engine.fill_batch(model, requests, lambda: all(job.ticket() for job in jobs))
        if self._max_rows > 1:  # a batching host: every call of a whole batch carries all its rows
            self.fill_steps += results[0].model_calls
            self.step_rows += results[0].model_calls * sum(job.rows for job in jobs)
        return results

    def close(self, wait_s: float = 0.0) -> bool:
        """Cancel every ticket and queued job and stop the thread once its current job ends; wait up to
        `wait_s` for that. True once the thread has ended.

        A process must not finalize while this thread is inside native code (a checkpoint being read by
        safetensors, a forward pass): CPython 3.11 ends a daemon thread that wakes up during finalization
        with `pthread_exit`, whose unwinding through those frames calls `std::terminate` (SIGABRT,
        "terminate called without an active exception"). So whoever exits waits here first.
        """
        with self._lock:
            for ticket in self._tickets.values():
                ticket.cancel()
            self._closed = True
            for job in self._queue:
                job.future.cancel()
            self._queue.clear()
            self._ready.notify_all()
        if threading.current_thread() is not self._thread:
            self._thread.join(wait_s)
        return not self._thread.is_alive()



def load_model(path: str | None, device: str | None, dtype: str | None, trust_remote_code: bool) -> LoadedModel:
    """`dice_lsp.engine.load_model`: the engine (torch, ~1 s to import) is imported here, on the host's model
    thread, so a server answers its client while the model loads."""
    return engine.load_model(path, device, dtype, trust_remote_code)


def _supports(model: LoadedModel, request: FillRequest) -> bool:
    from dice_lsp.engine import block_scheduler, continuous

    return continuous.supports(model, request) or block_scheduler.supports(model, request)


def _key(model: LoadedModel, request: FillRequest) -> object:
    """The queue key of a fill: fills with equal keys share a batch. One key for every fill a step scheduler takes
    (`block_scheduler.KEY`, `continuous.KEY`: whatever their sizes and samplers, they join the running batch);
    else `batch_key` (None: the fill runs alone)."""
    from dice_lsp.engine import block_scheduler, continuous

    if continuous.supports(model, request):
        return continuous.KEY
    return block_scheduler.key(model, request)


def _scheduler(model: LoadedModel, max_rows: int, peak: int) -> FillScheduler | BlockScheduler:
    """In-place fills join between denoising steps (`continuous`), block-diffusion fills too, each row at its own
    block (`block_scheduler`). A block batch gets spare rows for joiners as many as the last block run held at once
    (`peak`, up to `JOIN_ROWS`): a lone editor's fills run in a batch of their own rows (a 16-row step cost a lone
    fill ~20% on the H100), a busy server's have room to join."""
    from dice_lsp.engine.block_scheduler import JOIN_ROWS, BlockScheduler
    from dice_lsp.engine.continuous import FillScheduler

    if model.attention == "block":
        return BlockScheduler(model, min(max_rows, JOIN_ROWS, peak))
    return FillScheduler(model)
