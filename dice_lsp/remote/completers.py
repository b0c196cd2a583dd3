"""The CPU side of the team server's completions, in worker processes that ask the server for fills.

A completion is mostly Python work besides the model: find the hole, parse and tokenize the file, then
clean, check, rename and re-mask the model's fills and run clang's check. The model thread needs the GIL
between denoising steps (every torch call takes it again), and Python work on another thread of its
process makes it wait up to the interpreter's switch interval each time. On the 2-core development
machine a lone fill took 208 ms on an idle server, 447 ms with the checks running beside it in another
process (the two cores shared) and 643 ms with them on a thread of the model's process
(`docs/PERFORMANCE.md`, team server). Preparation moved to processes for this reason first; the checks
that the completion pipeline added since ran on the request threads, in the model's process.

So a completion runs whole in one worker: `begin` prepares it and starts `PreparedFill.completion` on a
thread of the worker (`_Run`) whose filler hands each fill request back to the server and blocks until
`resume` brings the result. The pipeline (`complete.finish`) is unchanged, and a worker interleaves many
completions while their fills are on the model. A completion stays on its worker from `begin` to its
answer (its state lives there); a file's completions go to the same worker unless it is busier than
another, so clang precompiles a file's preamble once (`toolchain.clang.Preambles` is per process).
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
import queue
import threading
import time
import zlib
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from dice_lsp.complete import Completion, Filler, front_end_for, lf_text, prepare
from dice_lsp.engine.fill_types import FillRequest, FillResult
from dice_lsp.engine.tokenizer import Tokenizer
from dice_lsp.lifetime import watch_parent
from dice_lsp.settings import Settings
from dice_lsp.textdoc import Position
from dice_lsp.toolchain.flags import CompileFlags

WORKERS = max(1, min(8, (os.cpu_count() or 2) // 2))  # processes that prepare and check completions


@dataclass(frozen=True)
class Step:
    """What a worker says after `begin` or `resume`: the next fill it needs (`fill`), or the completion (None
    when the cursor is at no hole); `worker_ms`: the time the worker spent on this step."""

    fill: FillRequest | None
    completion: Completion | None
    worker_ms: float


class _Run:
    """One completion on a thread of a worker process; its filler waits for the server's answers."""

    def __init__(self, work: Callable[[Filler], Completion]) -> None:
        self._asks: queue.Queue[tuple[FillRequest | None, Completion | None, BaseException | None]] = queue.Queue()
        self._answers: queue.Queue[FillResult | BaseException] = queue.Queue()
        threading.Thread(target=self._main, args=(work,), name="dice-completion", daemon=True).start()

    def _main(self, work: Callable[[Filler], Completion]) -> None:
        try:
            self._asks.put((None, work(self._fill), None))
        except BaseException as exc:  # raised to the server by `resume`
            self._asks.put((None, None, exc))

    def _fill(self, request: FillRequest) -> FillResult:
        self._asks.put((request, None, None))
        answer = self._answers.get()
        if isinstance(answer, BaseException):
            raise answer
        return answer

    def next(self, answer: FillResult | BaseException | None = None) -> tuple[FillRequest | None, Completion | None]:
        """Give the fill asked for last (None at the start), then wait for the next ask or the end."""
        if answer is not None:
            self._answers.put(answer)
        request, completion, error = self._asks.get()
        if error is not None:
            raise error
        return request, completion


_TOKENIZER: tuple[Tokenizer, int] | None = None  # in a worker: the model's tokenizer and window
_RUNS: dict[int, _Run] = {}  # in a worker: its completions waiting for fills


def load_worker(folder: Path, window: int, server: int) -> None:
    """In a worker process: exit with the server (`server` is its pid), load the tokenizer."""
    global _TOKENIZER
    watch_parent(server)
    _TOKENIZER = Tokenizer(folder), window


def begin(job: int, text: str, position: Position, settings: Settings,
          selection: tuple[Position, Position] | None, started: float) -> Step:
    """In a worker: prepare the completion and run it up to its first fill."""
    assert _TOKENIZER is not None, "load_worker runs first"
    clock = time.perf_counter()
    prepared = prepare(*_TOKENIZER, text, position, settings, selection)
    if prepared is None:
        return Step(None, None, (time.perf_counter() - clock) * 1000)
    prepared = replace(prepared, started=started)
    # the client's folders are not here: clang reads the text with the server's CUDA headers and the request's
    # defines (a local #include it cannot find means it cannot tell)
    document = lf_text(text)[0]

    def work(filler: Filler) -> Completion:
        front_end = front_end_for(document, None, CompileFlags(arch=settings.arch, std=settings.std,
                                                               defines=settings.defines), settings)
        return prepared.completion(filler(prepared.request), filler, document=document, front_end=front_end)

    _RUNS[job] = _Run(work)
    return _step(job, None, clock)


def resume(job: int, answer: FillResult | BaseException) -> Step:
    """In a worker: give a completion the fill it asked for (or why there is none) and run it on."""
    return _step(job, answer, time.perf_counter())


def _step(job: int, answer: FillResult | BaseException | None, clock: float) -> Step:
    try:
        request, completion = _RUNS[job].next(answer)
    except BaseException:
        del _RUNS[job]
        raise
    if request is None:
        del _RUNS[job]
    return Step(request, completion, (time.perf_counter() - clock) * 1000)


@dataclass
class Timing:
    """Where the server's completions spent their time, summed (`status` reports the means)."""

    completions: int = 0
    worker_ms: float = 0.0  # in the workers: prepare, checks, clang
    model_ms: float = 0.0  # waiting for fills (queue and denoising)
    total_ms: float = 0.0  # the whole handler, hops between processes included

    def to_json(self) -> dict[str, Any]:
        n = max(1, self.completions)
        return {"completions": self.completions, "worker_ms": round(self.worker_ms / n, 1),
                "model_ms": round(self.model_ms / n, 1), "total_ms": round(self.total_ms / n, 1)}


class Completers:
    """`count` worker processes completing for the server; see the module's docstring."""

    def __init__(self, folder: Path, window: int, count: int = WORKERS) -> None:
        spawn = multiprocessing.get_context("spawn")
        self.pools = [ProcessPoolExecutor(1, mp_context=spawn, initializer=load_worker,
                                          initargs=(folder, window, os.getpid())) for _ in range(count)]
        self.busy = [0] * count
        self.timing = Timing()
        self._lock = threading.Lock()
        self._jobs = itertools.count()
        for pool in self.pools:  # each worker has imported and loaded before the first request
            pool.submit(str, 0).result()

    def _pick(self, text: str) -> int:
        """The worker for a completion of `text`: the one its #include lines hash to (where clang's preamble of
        the file is), unless that one is busier than the least busy by more than one completion."""
        includes = "\n".join(line for line in text.split("\n") if line.lstrip().startswith("#include"))
        with self._lock:
            index = zlib.crc32(includes.encode("utf-8", "surrogatepass")) % len(self.pools)
            least = min(range(len(self.pools)), key=self.busy.__getitem__)
            if self.busy[index] > self.busy[least] + 1:
                index = least
            self.busy[index] += 1
            return index

    def complete(self, text: str, position: Position, settings: Settings,
                 selection: tuple[Position, Position] | None, started: float,
                 fill: Callable[[FillRequest], FillResult]) -> Completion | None:
        """The completion at `position` (None: the cursor is at no hole), its fills made by `fill`."""
        index = self._pick(text)
        pool, job = self.pools[index], next(self._jobs)
        worker_ms = model_ms = 0.0
        try:
            step = pool.submit(begin, job, text, position, settings, selection, started).result()
            worker_ms += step.worker_ms
            while step.fill is not None:
                clock = time.perf_counter()
                answer: FillResult | BaseException
                try:
                    answer = fill(step.fill)
                except Exception as exc:  # the worker's pipeline decides (a re-masking round may go without)
                    answer = exc
                model_ms += (time.perf_counter() - clock) * 1000
                step = pool.submit(resume, job, answer).result()
                worker_ms += step.worker_ms
            return step.completion
        finally:
            with self._lock:
                self.busy[index] -= 1
                self.timing.completions += 1
                self.timing.worker_ms += worker_ms
                self.timing.model_ms += model_ms
                self.timing.total_ms += (time.perf_counter() - started) * 1000

    def close(self) -> None:
        for pool in self.pools:
            pool.shutdown(wait=False, cancel_futures=True)
