"""Kernel timing that a careless or crafty kernel cannot flatter.

CUDA events around each launch on the current stream; warm-up first; the L2 cache flushed (a 256 MB
buffer written) before every trial, outside the timed region; input sets rotated; many trials and the
median with its spread. The copy bandwidth measured here gives the physical floor of a kernel: the
bytes it must move over that bandwidth. A time under the floor means the kernel skipped work.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass

import torch

FLUSH_BYTES = 256 << 20
FLOOR_MARGIN = 1.1  # a kernel may beat a plain copy's bandwidth by a little (fewer, wider transactions)


@dataclass(frozen=True)
class Timing:
    median_ms: float
    spread_pct: float  # half the interquartile range, over the median
    trials: int


class Timer:
    def __init__(self, warmup_ms: float = 25.0, budget_ms: float = 400.0, min_trials: int = 20,
                 max_trials: int = 2000) -> None:
        self.warmup_ms, self.budget_ms = warmup_ms, budget_ms
        self.min_trials, self.max_trials = min_trials, max_trials
        self.flush = torch.empty(FLUSH_BYTES, dtype=torch.uint8, device="cuda")

    def time(self, launch: Callable[[int], None]) -> Timing:
        """Time `launch(i)`, which launches the kernel on input set `i` (the caller rotates sets)."""
        stream = torch.cuda.current_stream()
        estimate = self._estimate(launch)
        trials = int(min(self.max_trials, max(self.min_trials, self.budget_ms / max(estimate, 1e-3))))
        starts = [_event() for _ in range(trials)]
        ends = [_event() for _ in range(trials)]
        for i in range(trials):
            self.flush.zero_()
            starts[i].record(stream)
            launch(i)
            ends[i].record(stream)
        torch.cuda.synchronize()
        times = sorted(s.elapsed_time(e) for s, e in zip(starts, ends, strict=True))
        q1, median, q3 = statistics.quantiles(times, n=4) if len(times) > 1 else (times[0],) * 3
        return Timing(median, 100 * (q3 - q1) / 2 / median if median > 0 else 0.0, trials)

    def _estimate(self, launch: Callable[[int], None]) -> float:
        """Warm up (module load, first-touch) for `warmup_ms`, returning the time per launch in ms."""
        start, end = _event(), _event()
        count, elapsed = 0, 0.0
        while elapsed < self.warmup_ms and count < 1000:
            start.record()
            for i in range(max(1, count)):
                launch(i)
            end.record()
            end.synchronize()
            count, elapsed = count + max(1, count), elapsed + start.elapsed_time(end)
        return elapsed / count


def _event() -> torch.cuda.Event:
    return torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]


def copy_bandwidth(nbytes: int = 1 << 30) -> float:
    """Device-memory bandwidth in bytes per second, as a large device-to-device copy achieves it (bytes read
    plus bytes written)."""
    source = torch.empty(nbytes // 2, dtype=torch.uint8, device="cuda")
    target = torch.empty_like(source)
    start, end = _event(), _event()
    best = float("inf")
    for _ in range(5):
        start.record()
        target.copy_(source)
        end.record()
        end.synchronize()
        best = min(best, start.elapsed_time(end))
    return nbytes / (best / 1000)


def floor_ms(bytes_moved: int, bandwidth: float) -> float:
    return bytes_moved / (bandwidth * FLOOR_MARGIN) * 1000
