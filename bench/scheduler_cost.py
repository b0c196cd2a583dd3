"""What a fill costs the model thread alone and in the step scheduler's batches, on the same held-out holes.

    python bench/scheduler_cost.py [--device cuda] [--holes 40] [--repeats 2]

The team server batches fills between denoising steps (`engine.continuous.FillScheduler`); a batch is worth it
only where a step carrying k fills costs less than k solo steps. This times, per fill (the device synchronised
around each measurement; held-out holes of bench/lsp_latency.py, editor defaults, grouped by batch key):

- `fill` alone (what the unbatched server runs);
- one stream through the scheduler (admit, step until it leaves: what the batched server runs for a lone fill);
- k streams admitted together into one scheduler and stepped until all leave, the time divided by k (k = 2, 4,
  8): the model thread's cost per fill when k editors' fills overlap completely.

Rows interleave per repeat, so a busy host slows all alike; medians and means are reported, with the scheduler's
rows per model call. A warm-up pass captures the CUDA graphs first.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import defaultdict
from collections.abc import Callable

import torch
from lsp_latency import fill_requests

from dice_lsp.engine import batch_key, fill, load_model
from dice_lsp.engine.continuous import FillScheduler
from dice_lsp.engine.fill_types import FillRequest
from dice_lsp.engine.model import LoadedModel
from dice_lsp.settings import Settings


def timed(model: LoadedModel, work: Callable[[], object]) -> float:
    if model.device.type == "cuda":
        torch.cuda.synchronize()
    started = time.perf_counter()
    work()
    if model.device.type == "cuda":
        torch.cuda.synchronize()
    return (time.perf_counter() - started) * 1000


def scheduled(model: LoadedModel, requests: list[FillRequest]) -> tuple[int, int]:
    """Run `requests` together through one scheduler to the end; its model calls and the rows they carried."""
    scheduler = FillScheduler(model)
    for request in requests:
        scheduler.admit(request)
    while scheduler.busy:
        for stream in scheduler.step():
            if stream.error is not None:
                raise stream.error
    return scheduler.calls, scheduler.row_steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--holes", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    model = load_model(None, args.device)
    requests = fill_requests(model, args.holes, settings=Settings(device=args.device))
    groups: dict[object, list[FillRequest]] = defaultdict(list)
    for request in requests:
        groups[batch_key(model, request)].append(request)
    sizes = (2, 4, 8)
    per_fill: dict[str, list[float]] = defaultdict(list)
    rows_per_call: dict[str, list[float]] = defaultdict(list)
    for repeat in range(args.repeats + 1):  # the first pass warms up (allocations, graph captures)
        for request in requests:
            solo = timed(model, lambda request=request: fill(model, request))
            lone = timed(model, lambda request=request: scheduled(model, [request]))
            if repeat:
                per_fill["fill alone"].append(solo)
                per_fill["lone stream"].append(lone)
        for k in sizes:
            for members in groups.values():
                for start in range(0, len(members) - k + 1, k):
                    batch = members[start:start + k]
                    got: list[tuple[int, int]] = []
                    ms = timed(model, lambda batch=batch, got=got: got.append(scheduled(model, batch)))
                    if repeat:
                        per_fill[f"{k} streams together"].append(ms / k)
                        rows_per_call[f"{k} streams together"].append(got[0][1] / max(1, got[0][0]))
    print(f"{model.name} on {model.device} ({model.dtype}), {len(requests)} holes in {len(groups)} batch keys, "
          f"{args.repeats} repeats")
    print("| run | measurements | per fill p50 ms | per fill mean ms | rows per model call |\n|---|---|---|---|---|")
    for name, values in per_fill.items():
        rows = rows_per_call.get(name)
        rows_text = f"{statistics.mean(rows):.2f}" if rows else "–"
        print(f"| {name} | {len(values)} | {statistics.median(values):.1f} | {statistics.mean(values):.1f} "
              f"| {rows_text} |")


if __name__ == "__main__":
    main()
