"""One static block step of an SDAR-8B-shaped model (random bf16 weights) on a GPU: the CUDA-graph replay
time, and the kernels of the same step run uncaptured (count, device time, the costliest by name).

    python bench/static_step_replay.py [--rows 1] [--cache 768] [--replays 50] [--compile MODE ...]

The step is the window a generation replays for every denoising call after the first ([rows, 8] ids at
positions 512..519 over a cache of 768). Its floor (`engine_latency.step_floor`: every weight except the input
embedding table, plus the table's rows the step's ids pick, at the read bandwidth measured in the same run) is
printed beside it, and the legacy floor of the logs before 2026-12-07 (every weight, the 1.245 GB table included,
at the device-to-device copy bandwidth) for comparison. `--compile MODE` also captures the
step with `static_forward` compiled by `torch.compile(mode=MODE)` ("default", "max-autotune-no-cudagraphs"),
one row per mode in the same run, with its compile time and how often its logits' top token equals the
uncompiled step's. The step with `engine.step_kernels`' Triton kernels (attention, q|k heads, SwiGLU, and the
products), with those kernels but cuBLAS's products, and with torch's operations (cuDNN attention, cuBLAS) are
captured and timed side by side, alternating; top-1 is compared with the first of them.
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict
from typing import Any

import torch

from dice_lsp.engine import step_kernels
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


def captured(lm: Transformer, rows: int, cache: int) -> BlockStepper:
    """A captured stepper whose ids and positions hold the bench's window (random ids, positions 508..515)."""
    size = lm.config.block_size
    stepper = BlockStepper(lm, rows, cache, capture=False)
    stepper.ids.copy_(torch.randint(10, lm.config.vocab_size, stepper.ids.shape, generator=torch.Generator()
                                    .manual_seed(1)))
    stepper.positions.copy_(torch.arange(512 - size, 512 + size))
    stepper._capture(lm)
    return stepper


def floor_lines(measured: dict[str, Any]) -> str:
    """The floor (`engine_latency.step_floor`), the read bandwidth of each pass and the legacy floor, as printed
    (bench/plots.py parses the first line: `floor: X ms per step (...read bandwidth...)`)."""
    return "\n".join((
        f"floor: {measured['floor_ms_per_step']:.2f} ms per step ({measured['step_read_bytes'] / 1e9:.3f} GB: the "
        f"weights except the input embedding table, plus the {measured['embedding_rows_bytes']} bytes of its rows the "
        f"step reads, at the read bandwidth {measured['read_bandwidth_GBps']:.0f} GB/s, "
        f"{measured['read_bandwidth_method']})",
        "read bandwidth by pass: " + "; ".join(f"{k} {v:.0f} GB/s"
                                               for k, v in measured["read_bandwidth_GBps_by_method"].items()),
        f"copy floor (legacy): {measured['copy_floor_ms']:.2f} ms per step ({measured['weight_bytes'] / 1e9:.3f} GB: "
        f"every weight, the embedding table included, at the copy bandwidth {measured['copy_bandwidth_GBps']:.0f} "
        "GB/s)"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1)
    parser.add_argument("--cache", type=int, default=768)
    parser.add_argument("--replays", type=int, default=50)
    parser.add_argument("--compile", nargs="*", default=[], metavar="MODE")
    args = parser.parse_args()
    device = torch.device("cuda")
    from engine_latency import step_floor

    lm = build(SDAR_8B, device)
    measured = step_floor(lm, args.rows * 2 * SDAR_8B.block_size, device)  # the ids of a step: [rows, 2 * block]
    floor, copy_floor = measured["floor_ms_per_step"], measured["copy_floor_ms"]
    rows = []
    default = step_kernels.ENABLED, step_kernels.PRODUCTS
    variants = {"Triton step kernels and products": (True, True), "Triton step kernels, cuBLAS products": (True, False),
                "torch operations": (False, False)}
    steppers: dict[str, BlockStepper] = {}
    with torch.inference_mode():
        for name, flags in variants.items():  # the kernels' first (compiling) call comes before any capture
            step_kernels.ENABLED, step_kernels.PRODUCTS = flags
            steppers[name] = captured(lm, args.rows, args.cache)
        times: dict[str, list[float]] = {name: [] for name in variants}
        for _ in range(3):  # alternating, so a drift of the GPU's clocks weighs on all alike
            for name, stepper in steppers.items():
                times[name].append(replay_ms(stepper, args.replays))
        print("replay ms, alternating: "
              + "; ".join(f"{k} {' '.join(f'{t:.3f}' for t in v)}" for k, v in times.items()))
        first = next(iter(steppers.values()))
        ms = min(times[next(iter(variants))])
        assert first.graph is not None and first.logits is not None
        first.graph.replay()
        reference = first.logits.argmax(-1).clone()
        for name, stepper in steppers.items():
            assert stepper.graph is not None and stepper.logits is not None
            stepper.graph.replay()
            agree = float((stepper.logits.argmax(-1) == reference).float().mean())
            assert stepper.ids.numel() == measured["step_tokens"]
            rows.append((f"eager, captured ({name})", min(times[name]), 0.0, agree))
    for name, flags in variants.items():
        step_kernels.ENABLED, step_kernels.PRODUCTS = flags
        count, device_ms, by_name = kernels(lm, first)
        print(f"uncaptured step, {name}: {count} kernels, {device_ms:.2f} ms of device time")
        for kernel, us in sorted(by_name.items(), key=lambda kv: -kv[1])[:8]:
            print(f"  {us / 1e3:6.2f} ms  {kernel}")
    step_kernels.ENABLED, step_kernels.PRODUCTS = default
    eager = lm.static_forward
    for mode in args.compile:
        body = torch.compile(lm.static_body, mode=mode, dynamic=False)
        lm.static_forward = (  # type: ignore[method-assign]
            lambda ids, positions, cache, only, body=body: body(ids, positions, cache, only, lm.static_weights()))
        started = time.perf_counter()
        with torch.inference_mode():
            other = captured(lm, args.rows, args.cache)
            seconds = time.perf_counter() - started
            ms_compiled = replay_ms(other, args.replays)
            assert other.logits is not None
            same = float((other.logits.argmax(-1) == reference).float().mean())
        rows.append((f"torch.compile({mode}), captured", ms_compiled, seconds, same))
        del other
        lm.static_forward = eager  # type: ignore[method-assign]
    print("\n" + floor_lines(measured))
    print("| step | replay ms | x floor | x copy floor (legacy) | compile s | top-1 = eager's |\n"
          "|---|---|---|---|---|---|")
    for name, replay, seconds, same in rows:
        print(f"| {name} | {replay:.2f} | {replay / floor:.2f} | {replay / copy_floor:.2f} | {seconds:.0f} "
              f"| {same:.1%} |")
    print(f"replay: {ms:.2f} ms per step (rows {args.rows}, cache {args.cache}, {args.replays} replays)")  # last: tail


if __name__ == "__main__":
    main()
