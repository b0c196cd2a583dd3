"""A completion at a cursor: the text before it is the prefix, the text after it the suffix.

The region is an empty range at the cursor that the model fills with up to `max_tokens` tokens.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from dice_lsp.engine import FillRequest, LoadedModel, SamplerConfig, fill
from dice_lsp.engine.sampling import CancelCheck, Progress
from dice_lsp.textdoc import Position, offset_at


@dataclass(frozen=True)
class Completion:
    texts: list[str]
    start: Position
    end: Position
    latency_ms: float
    model_calls: int

    def to_json(self, model: LoadedModel) -> dict[str, Any]:
        rng = {"start": self.start.to_json(), "end": self.end.to_json()}
        return {
            "items": [{"text": text, "range": rng} for text in self.texts],
            "model": model.name,
            "device": str(model.device),
            "latency_ms": round(self.latency_ms, 1),
        }


def complete_at(model: LoadedModel, text: str, position: Position, sampler: SamplerConfig,
                max_tokens: int = 64, candidates: int = 1, cancel: CancelCheck | None = None,
                progress: Progress | None = None) -> Completion:
    offset = offset_at(text, position)
    request = FillRequest(text[:offset], text[offset:], max_tokens, candidates, sampler)
    started = time.perf_counter()
    result = fill(model, request, cancel, progress)
    elapsed = (time.perf_counter() - started) * 1000
    return Completion(result.texts, position, position, elapsed, result.model_calls)
