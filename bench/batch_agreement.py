"""Does sharing a denoising batch change a fill? Batched against alone, on one device.

    python bench/batch_agreement.py [--device cuda] [--holes 64] [--batch 8]

The held-out holes of bench/lsp_latency.py, prepared as the server prepares completions, grouped into
batches of `--batch` requests of one shape; each batch's fills are compared with the same requests filled
one at a time (greedy decoding), twice: as one batch (`fill_batch`), and step by step as the team server
runs them (`engine.continuous`: one request joins the running batch per denoising step). On the CPU in
fp32 they are identical (tests/test_engine.py, tests/test_continuous.py); in bf16, other kernels for the
padded batch, and rotary tables rounded at other positions (a stream's region sits at position 0), may
round differently and flip a near-tie.
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict
from typing import Any

from lsp_latency import fill_requests

from dice_lsp.engine import FillRequest, batch_key, fill, fill_batch, load_model
from dice_lsp.engine.continuous import FillScheduler, Stream, supports
from dice_lsp.engine.model import LoadedModel


def requests_of(model: LoadedModel, count: int) -> list[FillRequest]:
    """The fill each hole's completion sends to the model."""
    return fill_requests(model, count)


def stepwise(model: LoadedModel, chunk: list[FillRequest]) -> list[list[str]]:
    """The chunk's fills through the step scheduler, the i-th request joining before step i."""
    scheduler = FillScheduler(model)
    streams: list[Stream] = []
    while len(streams) < len(chunk) or scheduler.busy:
        if len(streams) < len(chunk):
            streams.append(scheduler.admit(chunk[len(streams)]))
        scheduler.step()
    return [stream.result.texts if stream.result else [] for stream in streams]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="auto")
    parser.add_argument("--holes", type=int, default=64)
    parser.add_argument("--batch", type=int, default=8)
    args = parser.parse_args()
    model = load_model(None, device=args.device)
    groups: dict[Any, list[FillRequest]] = defaultdict(list)
    for request in requests_of(model, args.holes):
        groups[batch_key(model, request)].append(request)
    same = same_steps = total = 0
    alone_s = batched_s = steps_s = 0.0
    for group in groups.values():
        for lo in range(0, len(group), args.batch):
            chunk = group[lo:lo + args.batch]
            started = time.perf_counter()
            alone = [fill(model, request).texts for request in chunk]
            alone_s += time.perf_counter() - started
            started = time.perf_counter()
            together = [result.texts for result in fill_batch(model, chunk)]
            batched_s += time.perf_counter() - started
            same += sum(a == b for a, b in zip(alone, together, strict=True))
            if supports(model, chunk[0]):
                started = time.perf_counter()
                joined = stepwise(model, chunk)
                steps_s += time.perf_counter() - started
                same_steps += sum(a == b for a, b in zip(alone, joined, strict=True))
            total += len(chunk)
    print(f"{model.name} on {model.device} ({model.dtype}): {same}/{total} fills identical batched and alone; "
          f"{total} fills took {alone_s:.2f} s one at a time, {batched_s:.2f} s in batches of up to {args.batch} "
          f"({alone_s / batched_s:.2f}x)")
    print(f"step by step, joining one per step: {same_steps}/{total} fills identical to alone; {steps_s:.2f} s "
          f"({alone_s / steps_s:.2f}x)" if steps_s else "step by step: not for this model")


if __name__ == "__main__":
    main()
