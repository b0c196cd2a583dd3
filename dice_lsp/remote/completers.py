"""The CPU side of the team server's completions, in worker processes that ask the server for fills.

A completion is mostly Python work besides the model: find the hole, parse and tokenize the file, then
clean, check, rename and re-mask the model's fills and run clang's check. The model thread needs the GIL
between denoising steps (every torch call takes it again), and Python work on another thread of its
process makes it wait up to the interpreter's switch interval each time. On the 2-core development
machine a lone fill took 208 ms on an idle server, 447 ms with the checks running beside it in another
process (the two cores shared) and 643 ms with them on a thread of the model's process
(`docs/PERFORMANCE.md`, team server). Preparation moved to processes for this reason first; the checks
that the completion pipeline added since ran on the request threads, in the model's process.

So a completion runs whole in one worker process, on a thread of its own there (`_Run`): it prepares the
request, then runs `PreparedFill.completion` with a filler that sends each fill request to the server over
the worker's pipe and blocks until the server sends the result back. The pipeline (`complete.finish`) is
unchanged; a worker's loop only routes messages, so its completions run side by side while their fills
are on the model or clang reads their files. A completion stays on its worker from start to answer (its
state lives there); a file's completions go to the same worker unless it is busier than another, so
clang precompiles a file's preamble once (`toolchain.clang.Preambles` is per process). A worker that dies
fails its completions with a one-line error and is started again for the next one.
"""

from __future__ import annotations

import contextlib
import itertools
import multiprocessing
import os
import queue
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, replace
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from dice_lsp import sandbox
from dice_lsp.complete import Completion, Filler, decision_for, front_end_for, lf_text, model_sources, prepare
from dice_lsp.completion.sources import Candidate, Proposed
from dice_lsp.engine.fill_types import FillRequest, FillResult
from dice_lsp.engine.tokenizer import Tokenizer
from dice_lsp.errors import DiceError
from dice_lsp.lifetime import watch_parent
from dice_lsp.settings import Settings
from dice_lsp.textdoc import Position
from dice_lsp.toolchain.flags import CompileFlags

WORKERS = max(1, min(8, (os.cpu_count() or 2) // 2))  # processes that prepare and check completions


@dataclass(frozen=True)
class Step:
    """What a worker's completion says to the server: the next fill it needs (`fill`), or its completion (None
    when the cursor is at no hole); `worker_ms`: the worker's time since the last thing it said."""

    fill: FillRequest | None
    completion: Completion | None
    worker_ms: float


@dataclass(frozen=True)
class Begin:
    """The server asks a worker for a completion."""

    job: int
    text: str
    position: Position
    settings: Settings
    selection: tuple[Position, Position] | None
    started: float  # time.perf_counter() when the server got the request (one clock for all processes)
    proposals: tuple[Candidate, ...] = ()  # the client's workspace candidates for the hole


class _Run:
    """One completion on a thread of a worker; its filler sends fill requests to the server and waits."""

    def __init__(self, begin: Begin, tokenizer: tuple[Tokenizer, int], send: Callable[[int, Any], None],
                 folder: Path) -> None:
        self.begin, self.tokenizer, self.send, self.folder = begin, tokenizer, send, folder
        self.answers: queue.Queue[FillResult | BaseException] = queue.Queue()
        self.clock = time.perf_counter()  # the worker's time is counted from here to each message it sends

    def start(self) -> None:
        threading.Thread(target=self._main, name="dice-completion", daemon=True).start()

    def _say(self, fill: FillRequest | None, completion: Completion | None) -> None:
        self.send(self.begin.job, Step(fill, completion, (time.perf_counter() - self.clock) * 1000))

    def _main(self) -> None:
        try:
            self._say(None, self._complete())
        except BaseException as exc:  # raised to the server's caller
            self.send(self.begin.job, exc)

    def _complete(self) -> Completion | None:
        b = self.begin
        # the same pipeline as the editor's: the model's idiom bank and the client's workspace lines (`proposals`,
        # from its own index) propose, the model's show filter decides
        prepared = prepare(*self.tokenizer, b.text, b.position, b.settings, b.selection,
                           (*model_sources(self.folder), *((Proposed(b.proposals),) if b.proposals else ())))
        if prepared is None:
            return None
        prepared = replace(prepared, started=b.started)
        # the client's folders are not here: clang reads the text with the server's CUDA headers and the request's
        # defines (a local #include it cannot find means it cannot tell)
        document = lf_text(b.text)[0]
        front_end = front_end_for(document, None, CompileFlags(arch=b.settings.arch, std=b.settings.std,
                                                               defines=b.settings.defines), b.settings)
        filler: Filler = self._fill
        return prepared.completion(filler(prepared.request), filler, document=document, front_end=front_end,
                                   decision=decision_for(self.folder, b.settings))

    def _fill(self, request: FillRequest) -> FillResult:
        self._say(request, None)
        answer = self.answers.get()
        self.clock = time.perf_counter()
        if isinstance(answer, BaseException):
            raise answer
        return answer


def serve_worker(connection: Connection, folder: Path, window: int, server: int,
                 confinement: tuple[sandbox.Sandbox | None, str]) -> None:
    """A worker process's loop: start a `_Run` for each `Begin`, hand each (job, answer) to its run; ends at
    None or when the server is gone. `confinement` is the server's (`sandbox.adopt`): a worker runs clang on
    the client's text, so where the server sandboxes its tools, so does the worker."""
    watch_parent(server)
    sandbox.adopt(*confinement)
    tokenizer = Tokenizer(folder), window
    lock = threading.Lock()
    runs: dict[int, _Run] = {}

    def send(job: int, message: Any) -> None:
        if not isinstance(message, Step) or message.fill is None:
            runs.pop(job, None)
        with lock:
            try:
                connection.send((job, message))
            except Exception as exc:  # an error that does not pickle: its words do
                connection.send((job, DiceError(f"completion failed: {message!r} ({exc})")))

    connection.send((-1, "ready"))
    while (message := connection.recv()) is not None:
        if isinstance(message, Begin):  # registered before it runs: its last message takes it out
            runs[message.job] = run = _Run(message, tokenizer, send, folder)
            run.start()
        else:
            job, answer = message
            if job in runs:
                runs[job].answers.put(answer)


class _Worker:
    """The server's end of one worker process: sends requests, routes its messages to the waiting callers."""

    def __init__(self, folder: Path, window: int) -> None:
        context = multiprocessing.get_context("spawn")
        self.connection, theirs = context.Pipe()
        confinement = (sandbox.active(), sandbox.mode())
        self.process = context.Process(target=serve_worker, args=(theirs, folder, window, os.getpid(), confinement),
                                       name="dice-completer", daemon=True)
        self.process.start()
        theirs.close()
        self.lock = threading.Lock()
        self.waiting: dict[int, queue.Queue[Step | BaseException]] = {}
        self.alive = True
        if self.connection.recv() != (-1, "ready"):
            raise DiceError("a completion worker did not start")
        threading.Thread(target=self._read, name="dice-completer-reader", daemon=True).start()

    def _read(self) -> None:
        try:
            while True:
                job, message = self.connection.recv()
                with self.lock:
                    box = self.waiting.get(job)
                if box is not None:
                    box.put(message)
        except (EOFError, OSError):
            pass
        with self.lock:
            self.alive = False
            boxes = list(self.waiting.values())
        for box in boxes:
            box.put(DiceError(f"the completion worker (pid {self.process.pid}) ended"))

    def send(self, job: int, message: Any) -> queue.Queue[Step | BaseException]:
        with self.lock:
            if not self.alive:
                raise DiceError(f"the completion worker (pid {self.process.pid}) ended")
            box = self.waiting.setdefault(job, queue.Queue())
            try:
                self.connection.send(message)
            except (OSError, ValueError):  # it ended before the reader saw its pipe close (a broken pipe)
                self.alive = False
                raise DiceError(f"the completion worker (pid {self.process.pid}) ended") from None
        return box

    def done(self, job: int) -> None:
        with self.lock:
            self.waiting.pop(job, None)

    def close(self) -> None:
        with self.lock, contextlib.suppress(OSError, ValueError):
            self.connection.send(None)
        self.process.join(1)
        if self.process.is_alive():
            self.process.kill()


@dataclass
class Timing:
    """Where the server's completions spent their time, summed since the server started (`status`)."""

    completions: int = 0
    worker_ms: float = 0.0  # in the workers: prepare, checks, clang
    model_ms: float = 0.0  # waiting for fills (queue and denoising)
    total_ms: float = 0.0  # the whole handler, hops between processes included

    def to_json(self) -> dict[str, Any]:
        return {"completions": self.completions, "worker_s": round(self.worker_ms / 1000, 3),
                "model_s": round(self.model_ms / 1000, 3), "total_s": round(self.total_ms / 1000, 3)}


class Completers:
    """`count` worker processes completing for the server; see the module's docstring."""

    def __init__(self, folder: Path, window: int, count: int = WORKERS) -> None:
        self.folder, self.window = folder, window
        self.workers = [_Worker(folder, window) for _ in range(count)]  # each has loaded before the first request
        self.busy = [0] * count
        self.timing = Timing()
        self._lock = threading.Lock()
        self._jobs = itertools.count()

    def _pick(self, text: str) -> int:
        """The worker for a completion of `text`: the one its #include lines hash to (where clang's preamble of
        the file is), unless that one is busier than the least busy by more than one completion."""
        includes = "\n".join(line for line in text.split("\n") if line.lstrip().startswith("#include"))
        with self._lock:
            index = zlib.crc32(includes.encode("utf-8", "surrogatepass")) % len(self.workers)
            least = min(range(len(self.workers)), key=self.busy.__getitem__)
            if self.busy[index] > self.busy[least] + 1:
                index = least
            self.busy[index] += 1
            return index

    def _worker(self, index: int) -> _Worker:
        with self._lock:
            worker = self.workers[index]
            if worker.alive:
                return worker
        fresh = _Worker(self.folder, self.window)  # the last one died (killed, out of memory)
        with self._lock:
            self.workers[index] = fresh
        return fresh

    def complete(self, text: str, position: Position, settings: Settings,
                 selection: tuple[Position, Position] | None, started: float,
                 fill: Callable[[FillRequest], FillResult], proposals: tuple[Candidate, ...] = ()) -> Completion | None:
        """The completion at `position` (None: the cursor is at no hole), its fills made by `fill`; `proposals`:
        candidates the client's workspace index made for the hole."""
        index, job = self._pick(text), next(self._jobs)
        worker_ms = model_ms = 0.0
        try:
            worker = self._worker(index)
            box = worker.send(job, Begin(job, text, position, settings, selection, started, proposals))
            try:
                while True:
                    step = box.get()
                    if isinstance(step, BaseException):
                        raise step
                    worker_ms += step.worker_ms
                    if step.fill is None:
                        return step.completion
                    clock = time.perf_counter()
                    answer: FillResult | BaseException
                    try:
                        answer = fill(step.fill)
                    except Exception as exc:  # the worker's pipeline decides (a re-masking round may go without)
                        answer = exc
                    model_ms += (time.perf_counter() - clock) * 1000
                    worker.send(job, (job, answer))
            finally:
                worker.done(job)
        finally:
            with self._lock:
                self.busy[index] -= 1
                self.timing.completions += 1
                self.timing.worker_ms += worker_ms
                self.timing.model_ms += model_ms
                self.timing.total_ms += (time.perf_counter() - started) * 1000

    def close(self) -> None:
        for worker in self.workers:
            worker.close()
