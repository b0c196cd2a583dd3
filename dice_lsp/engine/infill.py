"""Fill a region between a prefix and a suffix, the way each model family does it.

Bidirectional models fill in place: prefix + a canvas of masks + suffix in one sequence; pad/EOS tokens
let the fill end before the canvas does. Block-diffusion models cannot see a suffix that comes after
the canvas, so the prefix and suffix go into a fill-in-the-middle prompt and the middle is generated
block by block until a stop token (how DICE fills kernels).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from dice_lsp.engine.model import LoadedModel
from dice_lsp.engine.sampling import CancelCheck, Denoiser, Progress, SamplerConfig, fill_in_place, generate_blocks
from dice_lsp.errors import DiceError, ModelLoadError


@dataclass(frozen=True)
class FillRequest:
    prefix: str
    suffix: str
    max_tokens: int = 64
    candidates: int = 1
    sampler: SamplerConfig = field(default_factory=SamplerConfig)

    def __post_init__(self) -> None:
        if self.max_tokens < 1:
            raise DiceError("max_tokens must be at least 1")
        if self.candidates < 1:
            raise DiceError("candidates must be at least 1")


@dataclass(frozen=True)
class FillResult:
    texts: list[str]
    model_calls: int


def _fit_context(prefix: list[int], suffix: list[int], budget: int) -> tuple[list[int], list[int]]:
    """Keep the tokens nearest the region: up to a quarter of the budget for the suffix, the rest prefix."""
    keep_suffix = min(len(suffix), budget // 4)
    keep_prefix = min(len(prefix), budget - keep_suffix)
    keep_suffix = min(len(suffix), budget - keep_prefix)
    return prefix[len(prefix) - keep_prefix:], suffix[:keep_suffix]


def _decode(model: LoadedModel, rows: torch.Tensor) -> list[str]:
    """Cut each row at its first pad/EOS and decode it."""
    stops = model.special.stop_ids
    texts = []
    for row in rows.tolist():
        cut = next((i for i, tok in enumerate(row) if tok in stops), len(row))
        texts.append(model.tokenizer.decode(row[:cut]))
    return texts


def fill(model: LoadedModel, request: FillRequest, cancel: CancelCheck | None = None,
         progress: Progress | None = None) -> FillResult:
    tok, special = model.tokenizer, model.special
    denoiser = Denoiser(request.sampler, special, model.device, cancel, progress)
    region = min(request.max_tokens, model.window // 2)
    prefix, suffix = tok.encode(request.prefix), tok.encode(request.suffix)
    if model.attention == "bidirectional":
        prefix, suffix = _fit_context(prefix, suffix, model.window - region)
        row = [*prefix, *([special.mask_id] * region), *suffix]
        x = torch.tensor([row] * request.candidates, dtype=torch.long, device=model.device)
        lo = len(prefix)
        fill_in_place(model.lm, x, lo, lo + region, denoiser)
        return FillResult(_decode(model, x[:, lo:lo + region]), denoiser.model_calls)
    fim_prefix, fim_suffix, fim_middle = special.fim_prefix_id, special.fim_suffix_id, special.fim_middle_id
    if fim_prefix is None or fim_suffix is None or fim_middle is None:
        raise ModelLoadError(f"{model.name}: its tokenizer has no fill-in-the-middle tokens")
    block = model.lm.config.block_size
    prefix, suffix = _fit_context(prefix, suffix, model.window - region - 3 - block)
    prompt = [fim_prefix, *prefix, fim_suffix, *suffix, fim_middle]
    ids = generate_blocks(model.lm, prompt, request.candidates, region, denoiser, special.stop_ids)
    return FillResult(_decode(model, ids), denoiser.model_calls)
