"""Why the team server keeps a completion's Python work out of the model's process: a lone fill on the model
thread, alone, with completions' checks running in another process, and with them on a thread beside it.

    python bench/gil_convoy.py [--holes 12] [--fills 24]

The model thread (`jobs.model_host.ModelHost`, dice-tiny on this CPU, the product's threads) fills held-out
holes one after another; beside it, the finishing half of completions (clean, check, rename: the pipeline
without the model, `PreparedFill.completion`) runs in a loop on a thread of the same process (the server
before `remote.completers`) or in a separate process (now). Rows run in the order alone, thread, process,
process, thread, alone; the fill times of both passes are pooled. On a machine with spare cores the process
row costs the fill nothing; the thread row's extra cost is the GIL the fill must take back between ops.
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import sys
import threading
import time

from lsp_latency import holes

from dice_lsp.complete import PreparedFill, prepare
from dice_lsp.engine.fill_types import FillResult
from dice_lsp.jobs.model_host import ModelHost
from dice_lsp.settings import Settings
from dice_lsp.textdoc import Position

Work = list[tuple[PreparedFill, FillResult]]


def finish_loop(work: Work, seconds: float) -> None:
    """Finish the completions again and again for `seconds` (each with a fresh parse of its document)."""
    until = time.perf_counter() + seconds
    while time.perf_counter() < until:
        for prepared, result in work:
            prepared.__dict__.pop("checker", None)
            prepared.completion(result, None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--holes", type=int, default=12)
    parser.add_argument("--fills", type=int, default=24, help="timed fills per row")
    args = parser.parse_args()
    settings = Settings(type_check=False)
    host = ModelHost(lambda _: None, 32)
    host.load(settings).result()
    model = host.model()
    work: Work = []
    for text, line, character, _ in holes(args.holes):
        prepared = prepare(model.tokenizer, model.window, text, Position(line, character), settings, None)
        if prepared is not None:
            work.append((prepared, host.fill(prepared.request, host.ticket("bench")).result()))

    def fills() -> list[float]:
        times = []
        for index in range(args.fills):
            started = time.perf_counter()
            host.fill(work[index % len(work)][0].request, host.ticket("bench")).result()
            times.append((time.perf_counter() - started) * 1000)
        return times

    fills()  # first-call costs
    budget = 4 * statistics.median(fills()) * args.fills / 1000 + 10  # seconds the checks keep running
    rows: dict[str, list[float]] = {}
    for mode in ("alone", "thread", "process", "process", "thread", "alone"):
        for prepared, _ in work:
            prepared.__dict__.pop("checker", None)  # a parsed tree does not cross processes
        beside: threading.Thread | multiprocessing.process.BaseProcess | None = None
        if mode == "thread":
            beside = threading.Thread(target=finish_loop, args=(work, budget), daemon=True)
        elif mode == "process":
            beside = multiprocessing.get_context("spawn").Process(target=finish_loop, args=(work, budget + 5))
        if beside is not None:
            beside.start()
            time.sleep(3 if mode == "process" else 0.2)  # the process has imported and started checking
        rows.setdefault(mode, []).extend(fills())
        print(f"{mode}: done", file=sys.stderr, flush=True)
        if isinstance(beside, threading.Thread):
            beside.join()
        elif beside is not None:
            beside.terminate()
            beside.join()
    host.close(5)
    print("| checks run | fills | p50 ms | p95 ms | mean ms |\n|---|---|---|---|---|")
    for mode, times in rows.items():
        label = {"alone": "nowhere (idle server)", "thread": "on a thread of the model's process",
                 "process": "in another process"}[mode]
        p95 = sorted(times)[min(len(times) - 1, int(0.95 * len(times)))]
        print(f"| {label} | {len(times)} | {statistics.median(times):.1f} | {p95:.1f} | {statistics.mean(times):.1f} |")


if __name__ == "__main__":
    main()
