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
from dice_lsp.engine.tokenizer import Tokenizer
from dice_lsp.settings import Settings
from dice_lsp.textdoc import Position, offset_at, position_at

FILL_MARGIN = 4  # tokens of the window kept free: healing and counting differ from the final encoding
Filler = Callable[[FillRequest], FillResult]  # runs the model (evaluation passes its own)


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


@dataclass(frozen=True)
class PreparedFill:
    """Everything a completion needs besides the model: made wherever the tokenizer is (the team server
    prepares in worker processes, so that parsing and tokenizing never hold the model thread's GIL)."""

    request: FillRequest
    context: FillContext
    start: Position
    end: Position
    started: float  # time.perf_counter() when the completion was asked for

    def completion(self, result: FillResult) -> Completion:
        texts = clean_candidates(result.texts, self.context)
        elapsed = (time.perf_counter() - self.started) * 1000
        return Completion(texts, self.start, self.end, elapsed, result.model_calls, self.context.hole.kind)


def fill_request(tokenizer: Tokenizer, window: int, text: str, hole: Hole,
                 settings: Settings) -> tuple[FillRequest, FillContext]:
    """The model request for `hole` (its context fitted into `window` tokens) and what cleaning needs."""
    canvas = min(hole.canvas_tokens, settings.max_canvas)
    budget = window - canvas - FILL_MARGIN
    if settings.context_tokens is not None:
        budget = min(budget, settings.context_tokens)
    prefix, suffix = build_context(text, hole, budget, tokenizer.token_starts)
    request = FillRequest(prefix, suffix, canvas, settings.candidates, settings.sampler_config(canvas))
    return request, FillContext(hole, text[:hole.start], text[hole.end:])


def fill_hole(model: LoadedModel, text: str, hole: Hole, settings: Settings, filler: Filler) -> tuple[list[str], int]:
    """Cleaned candidate texts for `hole` and the number of model calls spent."""
    request, context = fill_request(model.tokenizer, model.window, text, hole, settings)
    result = filler(request)
    return clean_candidates(result.texts, context), result.model_calls


def prepare(tokenizer: Tokenizer, window: int, text: str, position: Position, settings: Settings,
            selection: tuple[Position, Position] | None = None) -> PreparedFill | None:
    """The fill for the region at `position` (or the selection); None when there is no region to fill."""
    started = time.perf_counter()
    cursor = offset_at(text, position)
    span = None if selection is None else (offset_at(text, selection[0]), offset_at(text, selection[1]))
    hole = find_hole(text, cursor, span)
    if hole is None:
        return None
    request, context = fill_request(tokenizer, window, text, hole, settings)
    return PreparedFill(request, context, position_at(text, hole.start), position_at(text, hole.end), started)


def no_completion(position: Position, started: float) -> Completion:
    return Completion([], position, position, (time.perf_counter() - started) * 1000, 0, None)


def complete_at(model: LoadedModel, text: str, position: Position, settings: Settings,
                cancel: CancelCheck | None = None, progress: Progress | None = None,
                selection: tuple[Position, Position] | None = None) -> Completion:
    """The completion at `position`, filled here (with `cancel` checked and `progress` told between steps)."""
    started = time.perf_counter()
    prepared = prepare(model.tokenizer, model.window, text, position, settings, selection)
    if prepared is None:
        return no_completion(position, started)
    return prepared.completion(fill(model, prepared.request, cancel, progress))
