"""The static step's matrix products alone on a GPU: the bandwidth each reaches at the step's few rows.

    python bench/step_products.py [--rows 8] [--layers 36]

SDAR-8B's products (q|k|v, o, gate|up, down per layer; the output head once) with random bf16 weights, one
weight per layer so that nothing stays in L2, `--rows` activation rows (a block step: 8 per row of the batch).
Each product is captured `--layers` times in one CUDA graph, as the step runs it, and replayed; the table gives
µs per product and the weight bytes read per second, beside a device-to-device copy's rate in the same run, for
cuBLAS (`torch.mm`) and for `engine.step_kernels.product` (the static step's Triton product) side by side.
`--sweep` also tries every block shape, warp count and pipeline depth of that kernel per product and prints the
fastest (how `step_kernels._product_blocks` was chosen).
"""

from __future__ import annotations

import argparse
import itertools
from collections.abc import Callable

import torch

from dice_lsp.engine import step_kernels

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


def sweep(x: torch.Tensor, weights: list[torch.Tensor], outs: list[torch.Tensor]) -> str:
    """The fastest of `step_kernels._product`'s block shapes, warps and pipeline depths for these products."""
    assert step_kernels.triton is not None
    rows, k = x.shape
    n = weights[0].shape[0]
    block_m = max(16, step_kernels.triton.next_power_of_2(rows))
    best: tuple[float, str] | None = None
    for block_n, block_k, warps, stages in itertools.product((16, 32, 64), (128, 256), (4, 8), (3, 4, 6)):
        if n % block_n or k % block_k:
            continue

        def call(w: torch.Tensor, o: torch.Tensor, block_n: int = block_n, block_k: int = block_k,
                 warps: int = warps, stages: int = stages) -> None:
            step_kernels._product[(n // block_n,)](
                x, w, o, rows, k, x.stride(0), w.stride(0), o.stride(0), BLOCK_M=block_m, BLOCK_N=block_n,
                BLOCK_K=block_k, ACCUMULATE=False, num_warps=warps, num_stages=stages)
        try:
            per = graph_us([lambda w=w, o=o: call(w, o) for w, o in zip(weights, outs, strict=True)]) / len(weights)
        except Exception as exc:  # a shape past the shared memory (Triton's OutOfResources)
            print(f"  ({block_n}, {block_k}, {warps}, {stages}): {str(exc).splitlines()[0][:80]}")
            continue
        label = f"{per:.1f} µs: BLOCK_N {block_n}, BLOCK_K {block_k}, {warps} warps, {stages} stages"
        best = min(best or (per, label), (per, label))
    return best[1] if best else "none ran"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[8, 16, 32])
    parser.add_argument("--layers", type=int, default=36)
    parser.add_argument("--sweep", action="store_true", help="the Triton product's block shapes, per product")
    args = parser.parse_args()
    device = torch.device("cuda")
    step_kernels.PRODUCTS = True  # measured here whether or not the static step uses it
    from engine_latency import measure_copy_bandwidth

    copy_rate = measure_copy_bandwidth(device) / 1e12
    print(f"{torch.cuda.get_device_name(device)}, torch {torch.__version__}; copy {copy_rate:.2f} TB/s (read+write)")
    print("| product | rows | kernel | µs per product | weight TB/s | share of copy rate |\n|---|---|---|---|---|---|")
    for name, (n, k) in [*SHAPES.items(), ("output head", HEAD)]:
        count = 1 if name == "output head" else args.layers
        weights = [torch.randn(n, k, device=device, dtype=torch.bfloat16) for _ in range(count)]
        for rows in args.rows:
            x = torch.randn(rows, k, device=device, dtype=torch.bfloat16)
            outs = [torch.empty(rows, n, device=device, dtype=torch.bfloat16) for _ in range(count)]
            kernels: dict[str, Callable[[torch.Tensor, torch.Tensor], object]] = {
                "cuBLAS": lambda w, o, x=x: torch.mm(x, w.t(), out=o)}
            if step_kernels.product_usable(x, weights[0]):
                kernels["Triton"] = lambda w, o, x=x: step_kernels.product(x, w, o)
            for kernel, call in kernels.items():
                timed = [lambda w=w, o=o, call=call: call(w, o) for w, o in zip(weights, outs, strict=True)]
                per = graph_us(timed) / count
                rate = n * k * 2 / (per * 1e-6) / 1e12
                print(f"| {name} [{n} x {k}] | {rows} | {kernel} | {per:.1f} | {rate:.2f} | {rate / copy_rate:.0%} |",
                      flush=True)
            if args.sweep and "Triton" in kernels:
                print(f"  fastest Triton blocks: {sweep(x, weights, outs)}", flush=True)
        del weights
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
