"""The static step's matrix products alone on a GPU: the bandwidth each reaches at the step's few rows.

    python bench/step_products.py [--rows 8] [--layers 36]

SDAR-8B's products (q|k|v, o, gate|up, down per layer; the output head once) with random bf16 weights, one
weight per layer so that nothing stays in L2, `--rows` activation rows (a block step: 8 per row of the batch).
Each product is captured `--layers` times in one CUDA graph, as the step runs it, and replayed; the table gives
µs per product and the weight bytes read per second, beside a device-to-device copy's rate in the same run.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import torch

SHAPES = {"q|k|v": (6144, 4096), "o": (4096, 4096), "gate|up": (24576, 4096), "down": (4096, 12288)}
HEAD = (151936, 4096)


def graph_us(calls: list[Callable[[], object]], repeats: int = 10) -> float:
    """µs per replay of `calls` captured in order as one CUDA graph (after a warm-up on a side stream)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for call in calls:
            call()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for call in calls:
            call()
    graph.replay()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(repeats):
        graph.replay()
    end.record()
    torch.cuda.synchronize()
    return float(start.elapsed_time(end)) * 1e3 / repeats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[8, 16, 32])
    parser.add_argument("--layers", type=int, default=36)
    args = parser.parse_args()
    device = torch.device("cuda")
    from engine_latency import measure_copy_bandwidth

    copy_rate = measure_copy_bandwidth(device) / 1e12
    print(f"{torch.cuda.get_device_name(device)}, torch {torch.__version__}; copy {copy_rate:.2f} TB/s (read+write)")
    print("| product | rows | µs per product | weight TB/s | share of copy rate |\n|---|---|---|---|---|")
    for name, (n, k) in [*SHAPES.items(), ("output head", HEAD)]:
        count = 1 if name == "output head" else args.layers
        weights = [torch.randn(n, k, device=device, dtype=torch.bfloat16) for _ in range(count)]
        for rows in args.rows:
            x = torch.randn(rows, k, device=device, dtype=torch.bfloat16)
            outs = [torch.empty(rows, n, device=device, dtype=torch.bfloat16) for _ in range(count)]
            calls = [lambda x=x, w=w, o=o: torch.mm(x, w.t(), out=o) for w, o in zip(weights, outs, strict=True)]
            per = graph_us(calls) / count
            rate = n * k * 2 / (per * 1e-6) / 1e12
            print(f"| {name} [{n} x {k}] | {rows} | {per:.1f} | {rate:.2f} | {rate / copy_rate:.0%} |", flush=True)
        del weights
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
