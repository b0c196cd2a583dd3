"""Block-diffusion fills batched across requests against the same fills one at a time: what a team server with
an SDAR/DICE checkpoint gains when editors' fills are queued together.

    python bench/block_batch.py [--shape sdar-8b] [--device cuda] [--holes 32] [--sizes 1 2 4 8 16] [--repeats 2]
                                [--gaps 10 40]

The model is SDAR-8B-shaped with random bf16 weights (made on the device: no checkpoint to read) and the
embedded model's tokenizer (its FIM and mask tokens, and its 8,192-token vocabulary: the output head is 0.07
instead of 1.24 GB), `--shape tiny` a two-layer stand-in for a CPU check of the
script. The requests are the held-out holes of bench/lsp_latency.py with the editor's defaults (context,
canvas, sampler). For each batch size k the holes are taken k at a time: `fill` of each alone (what a host of
one row runs), `fill_batch` of the k (`sampling.generate_blocks_batch`: every row's block at one column, left
padding) and the k admitted together to the block scheduler (what the model host runs: `rowwise.RowwiseBatch`,
each row at its own block), alternating per group so a drifting clock weighs on all three. Reported per fill:
time (ms, p50 and mean, the batch's time divided by k), model calls, and how many batched fills have their solo
text (bf16: a padded or wider call rounds otherwise; fp32 CPU tests assert equality). Random weights write
noise, so a fill runs to its canvas's end or a random stop: the cost per denoising step is what this measures.

`--gaps MS...`: fills that arrive one after another, `MS` apart (the holes in order, `--holes` of them), as
editors' completions reach a team server: answered by whole batches (the fills that arrived while a batch ran
wait for it, then run as the next batch: the model host before fills joined running batches) and by the block
scheduler (`engine.block_scheduler`: a fill joins the running batch at the next denoising step), one after the
other on the same model. Reported per policy: each fill's latency from its arrival to its answer (p50 / p95 ms) and the
time until the last is answered.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch
from lsp_latency import fill_requests
from static_step_replay import build

from dice_lsp.engine import FillRequest, FillResult, fill, fill_batch
from dice_lsp.engine.block_scheduler import BlockScheduler
from dice_lsp.engine.checkpoint import EMBEDDED_MODEL
from dice_lsp.engine.model import LoadedModel
from dice_lsp.engine.presets import SDAR_8B
from dice_lsp.engine.tokenizer import Tokenizer

SHAPES = {  # the embedded tokenizer's vocabulary (8,192 tokens), so every token a fill writes decodes
    "sdar-8b": dataclasses.replace(SDAR_8B, vocab_size=8192),
    "tiny": dataclasses.replace(SDAR_8B, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                                num_attention_heads=4, num_key_value_heads=2, head_dim=32, vocab_size=8192),
}


def model_of(shape: str, device: torch.device) -> LoadedModel:
    lm = build(SHAPES[shape], device)
    tokenizer = Tokenizer(EMBEDDED_MODEL)
    return LoadedModel(lm, tokenizer, f"{shape}-shaped (random)", EMBEDDED_MODEL, device, torch.bfloat16)


def timed(device: torch.device, work: Callable[[], Any]) -> tuple[float, Any]:
    if device.type == "cuda":
        torch.cuda.synchronize()
    started = time.perf_counter()
    out = work()
    if device.type == "cuda":
        torch.cuda.synchronize()
    return (time.perf_counter() - started) * 1000, out


def whole_batches(model: LoadedModel, requests: list[FillRequest], arrivals: list[float]) -> list[float]:
    """Each fill's answer time (s from the start): a batch of the fills that arrived runs whole; those that arrive
    meanwhile wait for it."""
    started, done, answered = time.perf_counter(), 0, [0.0] * len(requests)
    while done < len(requests):
        now = time.perf_counter() - started
        if arrivals[done] > now:
            time.sleep(arrivals[done] - now)
            now = arrivals[done]
        group = [i for i in range(done, len(requests)) if arrivals[i] <= now]
        fill_batch(model, [requests[i] for i in group])
        if model.device.type == "cuda":
            torch.cuda.synchronize()
        for i in group:
            answered[i] = time.perf_counter() - started
        done += len(group)
    return answered


def scheduled(model: LoadedModel, requests: list[FillRequest]) -> list[FillResult]:
    """The fills admitted together to the block scheduler and stepped until all have left."""
    scheduler = BlockScheduler(model, capacity=len(requests))
    fills = [scheduler.admit(request) for request in requests]
    while scheduler.busy:
        scheduler.step()
    return [fill_.result for fill_ in fills if fill_.result is not None]


def joined(model: LoadedModel, requests: list[FillRequest], arrivals: list[float]) -> list[float]:
    """Each fill's answer time (s from the start): fills join the running batch at the next step."""
    scheduler = BlockScheduler(model)
    started, admitted, answered = time.perf_counter(), 0, [0.0] * len(requests)
    index: dict[int, int] = {}
    while admitted < len(requests) or scheduler.busy:
        now = time.perf_counter() - started
        if not scheduler.busy and arrivals[admitted] > now:
            time.sleep(arrivals[admitted] - now)
            now = arrivals[admitted]
        while admitted < len(requests) and arrivals[admitted] <= now and scheduler.fits(requests[admitted]):
            index[id(scheduler.admit(requests[admitted]))] = admitted
            admitted += 1
        for left in scheduler.step():
            answered[index[id(left)]] = time.perf_counter() - started
    return answered


def staggered(model: LoadedModel, requests: list[FillRequest], gaps: list[float]) -> None:
    policies = {"whole batches": whole_batches, "joined at the next step (the host's)": joined}
    print("\n| arrivals ms apart | fills | policy | latency p50 / p95 ms | last answered s | p50: whole / this |")
    print("|---|---|---|---|---|---|")
    for gap in gaps:
        arrivals = [i * gap / 1000 for i in range(len(requests))]
        whole = 0.0
        for name, policy in policies.items():
            answered = policy(model, requests, arrivals)
            waits = sorted((a - t) * 1000 for a, t in zip(answered, arrivals, strict=True))
            p50 = statistics.median(waits)
            whole = whole or p50
            print(f"| {gap:g} | {len(requests)} | {name} | {p50:.0f} / "
                  f"{waits[min(len(waits) - 1, int(0.95 * len(waits)))]:.0f} | {max(answered):.2f} "
                  f"| {whole / p50:.2f}x |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", choices=sorted(SHAPES), default="sdar-8b")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--holes", type=int, default=32)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 2, 4, 8, 16])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--gaps", type=float, nargs="*", default=[], metavar="MS",
                        help="also: fills arriving MS apart, whole batches against joining at the next step")
    args = parser.parse_args()
    device = torch.device(args.device)
    model = model_of(args.shape, device)
    requests = fill_requests(model, args.holes)
    print(f"{model.name} on {device} (bf16), {len(requests)} held-out holes, editor defaults "
          f"(canvas {requests[0].max_tokens} tokens, {requests[0].candidates} candidate(s), "
          f"{requests[0].sampler.strategy}, {requests[0].sampler.steps} steps per block)", flush=True)
    for request in requests[:2]:  # warm-up: kernels, allocator, the first graph captures
        fill(model, request)
        fill_batch(model, requests[:2])
        scheduled(model, requests[:2])
    print("| fills together | groups | alone ms per fill (p50 / mean) | one column: ms per fill (p50 / mean), "
          "alone / it, text = alone | rows at their own blocks (the host's): ms per fill (p50 / mean), alone / it, "
          "text = alone |")
    print("|---|---|---|---|---|")
    for k in args.sizes:
        alone_ms: list[float] = []
        runs: dict[str, list[float]] = {"column": [], "rows": []}
        same = {"column": 0, "rows": 0}
        total = 0
        for repeat in range(args.repeats):
            for start in range(0, len(requests) - k + 1, k):
                group = requests[start:start + k]
                solo = []
                for request in group:
                    ms, result = timed(device, lambda request=request: fill(model, request))
                    alone_ms.append(ms)
                    solo.append(result)
                for name, batched in (("column", fill_batch), ("rows", scheduled)):
                    ms, together = timed(device, lambda group=group, batched=batched: batched(model, group))
                    runs[name].append(ms / k)
                    if repeat == 0:
                        same[name] += sum(a.texts == b.texts for a, b in zip(solo, together, strict=True))
                total += k if repeat == 0 else 0
        cells = [f"{statistics.median(ms):.1f} / {statistics.mean(ms):.1f}, "
                 f"{statistics.mean(alone_ms) / statistics.mean(ms):.2f}x, {same[name]}/{total}"
                 for name, ms in runs.items()]
        print(f"| {k} | {len(runs['rows'])} | {statistics.median(alone_ms):.1f} / {statistics.mean(alone_ms):.1f} "
              f"| {cells[0]} | {cells[1]} |", flush=True)
    if args.gaps:
        staggered(model, requests, args.gaps)


if __name__ == "__main__":
    main()
