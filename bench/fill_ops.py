"""Count the eager operations of in-place fills, per phase: what a GPU launches from Python besides its graphs.

On a GPU the embedded model's fills are launch-bound (an eager operation costs ~10-20 µs of the host's CPU
for a few µs of GPU work), so the number of operations run outside captured graphs is what a fill costs
there. This counts them on the CPU (views and allocations excluded, `static_step_ops.OpCounter`), with the
static paths on (`window_graph.PATH = "static"`: on CUDA each static call is one graph replay), for:

- solo fills (`engine.fill`) of held-out holes, per fill, split into the first call, the window steps (a
  replay each on CUDA), the commits (sample, choose, write) and the rest: dynamic, static window steps with
  the first call eager (as before the first call was static), and all static;
- the team server's scheduler (`engine.continuous.FillScheduler`) running the same fills with a new one
  joining every other step, per step.

    python bench/fill_ops.py [--holes 6]
"""

from __future__ import annotations

import argparse
from collections import Counter
from collections.abc import Callable
from typing import Any

import torch
from lsp_latency import fill_requests
from static_step_ops import OpCounter

from dice_lsp.engine import batch_key, fill, load_model, sampling, window_graph
from dice_lsp.engine.continuous import FillScheduler
from dice_lsp.settings import Settings

GRAPHS = ("first call", "window steps")  # one replay each on CUDA


class Phases(OpCounter):
    """Counts operations under the name of the phase running them."""

    def __init__(self) -> None:
        super().__init__()
        self.phase = "rest"
        self.calls: Counter[str] = Counter()

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        before = sum(self.ops.values())
        out = super().__torch_dispatch__(func, types, args, kwargs)
        if sum(self.ops.values()) > before:
            self.calls[self.phase] += 1
        return out


def timed_as(counter: Phases, phase: str, run: Callable[..., Any]) -> Callable[..., Any]:
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        outer, counter.phase = counter.phase, phase
        try:
            return run(*args, **kwargs)
        finally:
            counter.phase = outer
    return wrapped


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--holes", type=int, default=6)
    args = parser.parse_args()
    model = load_model(None, "cpu", "float32")
    requests = fill_requests(model, args.holes, settings=Settings(device="cpu"))
    counter = Phases()
    patches = [(window_graph.FirstCall, "_forward", "first call"), (window_graph.WindowStepper, "_forward",
                                                                    "window steps"),
               (sampling.Denoiser, "commit", "commits"), (window_graph.WindowStepper, "load", "loads")]
    for owner, name, phase in patches:
        setattr(owner, name, timed_as(counter, phase, getattr(owner, name)))
    rows: list[tuple[str, str, float]] = []
    static_first = window_graph.first_call
    for path, label in (("dynamic", "dynamic"), ("static", "static window steps, eager first call"),
                        ("static", "static")):
        window_graph.PATH = path  # type: ignore[assignment]
        window_graph.first_call = static_first if label == "static" else (lambda *args: None)  # type: ignore
        fill(model, requests[0])  # lazy set-up outside the count
        counter.calls.clear()
        calls = 0
        with counter:
            for request in requests:
                calls += fill(model, request).model_calls
        eager = sum(n for phase, n in counter.calls.items() if path == "dynamic" or phase not in GRAPHS)
        for phase, n in sorted(counter.calls.items()):
            rows.append((f"solo fill, {label}", phase, n / len(requests)))
        rows.append((f"solo fill, {label}", "**eager in all**", eager / len(requests)))
    window_graph.PATH = "static"
    scheduler = FillScheduler(model)
    pending = [r for r in requests if batch_key(model, r) == scheduler.key]
    counter.calls.clear()
    steps = 0
    with torch.inference_mode(), counter:
        scheduler.admit(pending.pop(0))
        while scheduler.busy:
            scheduler.step()
            steps += 1
            if pending and steps % 2 == 0:
                scheduler.admit(pending.pop(0))
    for phase, n in sorted(counter.calls.items()):
        rows.append(("scheduler step, static", phase, n / steps))
    eager = sum(n for phase, n in counter.calls.items() if phase not in GRAPHS)
    rows.append(("scheduler step, static", "**eager in all**", eager / steps))
    print(f"{model.name}, {len(requests)} held-out fills ({calls // len(requests)} model calls each); scheduler: "
          f"{steps} steps, {scheduler.row_steps / max(scheduler.calls, 1):.1f} rows per model call")
    print("| run | phase | operations |\n|---|---|---|")
    for run, phase, n in rows:
        print(f"| {run} | {phase} | {n:.0f} |")


if __name__ == "__main__":
    main()
