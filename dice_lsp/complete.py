"""A completion at a cursor: find the hole, build the context, fill it, clean the candidates.

The hole (`dice_lsp.cuda.holes`) says which region to replace and how large a canvas to give the
model; the context (`dice_lsp.cuda.context`) keeps what matters inside the model window; the filters
(`dice_lsp.cuda.postprocess`) turn raw fills into text that fits between what is before and after.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dice_lsp.cuda.context import build_context
from dice_lsp.cuda.holes import Hole, find_hole
from dice_lsp.cuda.postprocess import FillContext, clean_candidates
from dice_lsp.engine import FillRequest, FillResult, LoadedModel, fill
from dice_lsp.engine.sampling import CancelCheck, Progress
from dice_lsp.settings import Settings
from dice_lsp.textdoc import Position, offset_at, position_at

FILL_MARGIN = 4  # tokens of the window kept free: healing and counting differ from the final encoding
Filler = Callable[[FillRequest], FillResult]  # runs the model: here, or batched on the model's thread


@dataclass(frozen=True)
class Completion:
    texts: list[str]
    start: Position
    end: Position
    latency_ms: float
    model_calls: int
    hole: str | None  # the kind of region filled, None when the cursor is at no hole

    def to_json(self, model: LoadedModel) -> dict[str, Any]:
        rng = {"start": self.start.to_json(), "end": self.end.to_json()}
        return {
            "items": [{"text": text, "range": rng} for text in self.texts],
            "hole": self.hole,
            "model": model.name,
            "device": str(model.device),
            "latency_ms": round(self.latency_ms, 1),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any], position: Position) -> Completion:
        """A completion a team server sent (`to_json`), asked for at `position`."""
        items = data["items"]
        span = items[0]["range"] if items else {"start": position.to_json(), "end": position.to_json()}
        return cls([item["text"] for item in items], Position(**span["start"]), Position(**span["end"]),
                   float(data["latency_ms"]), 0, data["hole"])


def fill_hole(model: LoadedModel, text: str, hole: Hole, settings: Settings, filler: Filler) -> tuple[list[str], int]:
    """Cleaned candidate texts for `hole` and the number of model calls spent."""
    canvas = min(hole.canvas_tokens, settings.max_canvas)
    budget = model.window - canvas - FILL_MARGIN
    if settings.context_tokens is not None:
        budget = min(budget, settings.context_tokens)
    prefix, suffix = build_context(text, hole, budget, model.tokenizer.token_starts)
    request = FillRequest(prefix, suffix, canvas, settings.candidates, settings.sampler_config(canvas))
    result = filler(request)
    context = FillContext(hole, text[:hole.start], text[hole.end:])
    return clean_candidates(result.texts, context), result.model_calls


def complete_at(model: LoadedModel, text: str, position: Position, settings: Settings,
                cancel: CancelCheck | None = None, progress: Progress | None = None,
                selection: tuple[Position, Position] | None = None, filler: Filler | None = None) -> Completion:
    """The completion at `position`; the model runs through `filler` when given (the team server batches
    there), else right here with `cancel` and `progress`."""
    started = time.perf_counter()
    cursor = offset_at(text, position)
    span = None if selection is None else (offset_at(text, selection[0]), offset_at(text, selection[1]))
    hole = find_hole(text, cursor, span)
    if hole is None:
        return Completion([], position, position, (time.perf_counter() - started) * 1000, 0, None)
    texts, calls = fill_hole(model, text, hole, settings,
                             filler or (lambda request: fill(model, request, cancel, progress)))
    elapsed = (time.perf_counter() - started) * 1000
    return Completion(texts, position_at(text, hole.start), position_at(text, hole.end), elapsed, calls, hole.kind)
