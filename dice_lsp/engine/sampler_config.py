"""How to denoise, as a plain value: the part of the samplers that settings and the CLI need without torch."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from dice_lsp.errors import DiceError

Strategy = Literal["low_confidence", "threshold", "entropy"]
STRATEGIES = ("low_confidence", "threshold", "entropy")


@dataclass(frozen=True)
class SamplerConfig:
    """How to denoise.

    strategy: `low_confidence` commits the `k` most confident tokens per step, `k` spread evenly over the
        step budget; `threshold` commits every token above `threshold` (and at least that `k`), so easy
        regions finish in fewer steps; `entropy` (entropy-bounded) commits the most confident tokens as
        long as the entropies of all but the most uncertain of them sum to at most `entropy_bound` nats
        (and at least that `k`): many tokens where the model is sure, few where it hesitates.
    steps: model calls per window (the whole region, or each block when `block_length` is set): the ceiling.
    min_steps: the floor for the adaptive strategies: before that many calls, at most an even share of the
        window's masks is committed per call.
    block_length: decode a bidirectional model's region in blocks of this many tokens, left to right
        (semi-autoregressive). Block-diffusion models always use their own block size.
    temperature: 0 is greedy; above 0 samples (needed for distinct candidates).
    context_cache: bidirectional models compute the context's keys/values once per window (with the
        window all masks) and reuse them while the window is denoised (Fast-dLLM's dual cache): later
        steps run the window's tokens only. Approximate, as the context would see the window change.
    """

    strategy: Strategy = "low_confidence"
    steps: int = 8
    threshold: float = 0.9
    entropy_bound: float = 1.0
    min_steps: int = 1
    block_length: int | None = None
    temperature: float = 0.0
    top_k: int = 0
    seed: int = 0
    context_cache: bool = True

    def __post_init__(self) -> None:
        if self.strategy not in STRATEGIES:
            raise DiceError(f"unknown sampler strategy {self.strategy!r}")
        if self.steps < 1 or not 1 <= self.min_steps <= self.steps:
            raise DiceError("steps must be at least 1, and min_steps between 1 and steps")
        if not (math.isfinite(self.entropy_bound) and self.entropy_bound >= 0):
            raise DiceError("entropy_bound must be a finite non-negative number")
        if not 0.0 < self.threshold <= 1.0:
            raise DiceError("threshold must be in (0, 1]")
        if self.temperature < 0 or self.top_k < 0:
            raise DiceError("temperature and top_k must not be negative")
        if self.block_length is not None and self.block_length < 1:
            raise DiceError("block_length must be at least 1")
