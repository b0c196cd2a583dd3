"""In-place fills with the window steps dynamic (eager, growing cache) and static (captured as CUDA graphs on a
GPU), side by side on the same held-out holes, in the order A B B A after a warm-up of both.

    python bench/window_steps.py [--device cuda] [--holes 40]

Prints per path: fills, p50/mean wall time per fill (the device synchronised around each), model calls per
fill; the ratio of the means; how many fills' texts are equal (bf16 rounds the fused step differently).
On a CPU the static path runs uncaptured (`window_graph.PATH = "static"`).
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from lsp_latency import fill_requests

from dice_lsp.engine import fill, load_model, window_graph
from dice_lsp.engine.fill_types import FillRequest
from dice_lsp.engine.model import LoadedModel
from dice_lsp.settings import Settings


def run(model: LoadedModel, requests: list[FillRequest], path: window_graph.WindowPath) -> tuple[list[float], int,
                                                                                                list[list[str]]]:
    window_graph.PATH = path

    def sync() -> None:
        if model.device.type == "cuda":
            torch.cuda.synchronize()

    walls, calls, texts = [], 0, []
    for request in requests:
        sync()
        started = time.perf_counter()
        result = fill(model, request)
        sync()
        walls.append((time.perf_counter() - started) * 1000)
        calls += result.model_calls
        texts.append(result.texts)
    return walls, calls, texts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--holes", type=int, default=40)
    args = parser.parse_args()
    model = load_model(None, args.device)
    requests = fill_requests(model, args.holes, settings=Settings(device=args.device))
    static: window_graph.WindowPath = "auto" if model.device.type == "cuda" else "static"
    paths: tuple[window_graph.WindowPath, ...] = ("dynamic", static)
    for path in paths:  # warm-up: allocations, captures
        run(model, requests, path)
    walls: dict[str, list[float]] = {path: [] for path in paths}
    calls: dict[str, int] = {path: 0 for path in paths}
    texts: dict[str, list[list[str]]] = {}
    for path in (*paths, *reversed(paths)):
        got, n, texts[path] = run(model, requests, path)
        walls[path] += got
        calls[path] += n
    print(f"{model.name} on {model.device} ({model.dtype}), {len(requests)} holes")
    print("| window steps | fills | p50 ms | mean ms | model calls per fill |")
    print("|---|---|---|---|---|")
    for path in paths:
        label = "dynamic (eager)" if path == "dynamic" else ("CUDA graph" if path == "auto" else "static")
        print(f"| {label} | {len(walls[path])} | {statistics.median(walls[path]):.1f} | "
              f"{statistics.mean(walls[path]):.1f} | {calls[path] / len(walls[path]):.1f} |")
    ratio = statistics.mean(walls["dynamic"]) / statistics.mean(walls[paths[1]])
    equal = sum(a == b for a, b in zip(texts["dynamic"], texts[paths[1]], strict=True))
    print(f"dynamic / {paths[1]} (means): {ratio:.2f}x; equal texts: {equal} of {len(requests)}")


if __name__ == "__main__":
    main()
