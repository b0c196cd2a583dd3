"""One static block step of an SDAR-8B-shaped model (random bf16 weights) on a GPU: the CUDA-graph replay
time, and the kernels of the same step run uncaptured (count, device time, the costliest by name).

    python bench/static_step_replay.py [--rows 1] [--cache 768] [--replays 50]

The step is the window a generation replays for every denoising call after the first ([rows, 8] ids at
positions 512..519 over a cache of 768). The weight-read floor is in bench/engine_latency.py's output.
"""

from __future__ import annotations

import argparse
from collections import defaultdict

import torch

from dice_lsp.engine.block_graph import BlockStepper
from dice_lsp.engine.config import ModelConfig
from dice_lsp.engine.presets import SDAR_8B
from dice_lsp.engine.transformer import Transformer


def build(cfg: ModelConfig, device: torch.device) -> Transformer:
    """Random weights made on the device in bf16 directly (no fp32 copy)."""
    torch.manual_seed(0)
    torch.set_default_dtype(torch.bfloat16)
    try:
        with torch.device(device):
            lm = Transformer(cfg).eval()
    finally:
        torch.set_default_dtype(torch.float32)
    return lm


def replay_ms(stepper: BlockStepper, replays: int) -> float:
    """The mean of `replays` back-to-back replays (after five), timed by CUDA events."""
    assert stepper.graph is not None
    for _ in range(5):
        stepper.graph.replay()
    start = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
    end = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
    start.record()
    for _ in range(replays):
        stepper.graph.replay()
    end.record()
    torch.cuda.synchronize()
    return float(start.elapsed_time(end)) / replays


def kernels(lm: Transformer, stepper: BlockStepper) -> tuple[int, float, dict[str, float]]:
    """Kernels of one uncaptured step: count, device ms, device µs by kernel name."""
    from torch.profiler import ProfilerActivity, profile

    with torch.inference_mode(), profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        lm.static_forward(stepper.ids, stepper.positions, stepper.cache, stepper.only)
        torch.cuda.synchronize()
    by_name: dict[str, float] = defaultdict(float)
    count = 0
    for event in prof.events():
        if str(event.device_type).endswith("CUDA"):
            count += 1
            by_name[event.name[:60]] += float(getattr(event, "device_time_total", 0.0))
    return count, sum(by_name.values()) / 1e3, by_name


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1)
    parser.add_argument("--cache", type=int, default=768)
    parser.add_argument("--replays", type=int, default=50)
    args = parser.parse_args()
    device = torch.device("cuda")
    lm = build(SDAR_8B, device)
    size = lm.config.block_size
    with torch.inference_mode():
        stepper = BlockStepper(lm, args.rows, args.cache, capture=True)
        stepper.ids.copy_(torch.randint(10, lm.config.vocab_size, stepper.ids.shape))
        stepper.positions.copy_(torch.arange(512 - size, 512 + size))
        ms = replay_ms(stepper, args.replays)
    count, device_ms, by_name = kernels(lm, stepper)
    for name, us in sorted(by_name.items(), key=lambda kv: -kv[1])[:8]:
        print(f"  {us / 1e3:6.2f} ms  {name}")
    print(f"uncaptured step: {count} kernels, {device_ms:.2f} ms of device time")
    print(f"replay: {ms:.2f} ms per step (rows {args.rows}, cache {args.cache}, {args.replays} replays)")  # last: tail


if __name__ == "__main__":
    main()
