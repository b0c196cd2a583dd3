"""Fill a region between a prefix and a suffix, the way each model family does it.

Bidirectional models fill in place: prefix + a canvas of masks + suffix in one sequence; pad/EOS tokens
let the fill end before the canvas does. Block-diffusion models cannot see a suffix that comes after
the canvas, so the prefix and suffix go into a fill-in-the-middle prompt and the middle is generated
block by block until a stop token (how DICE fills kernels); causal (autoregressive) models take the same
prompt and generate the middle a token at a time.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from dice_lsp.engine.model import LoadedModel
from dice_lsp.engine.sampling import (
    CancelCheck,
    Denoiser,
    Progress,
    SamplerConfig,
    fill_in_place,
    generate_blocks,
    generate_causal,
)
from dice_lsp.engine.tokenizer import Tokenizer
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


HEALING_SENTINEL = "x"


def heal_prefix(tok: Tokenizer, prefix: str) -> tuple[list[int], str]:
    """Tokens for `prefix` as the model saw such text in training, and the text they leave uncovered.

    A prefix that ends inside a token (an indentation run, half an identifier) tokenizes differently from
    the same text followed by code: `"\n    "` alone is one token, but before `if` it is `"\n   "` + `" if"`.
    Encoding the prefix with a word after it and dropping the tokens that reach past the prefix gives
    the tokens the model knows; the uncovered tail (`" "`) must then open the fill, and is cut from it.
    """
    ids = tok.encode(prefix + HEALING_SENTINEL)
    text = ""
    for count, token in enumerate(ids):
        piece = tok.decode([token])
        if len(text) + len(piece) > len(prefix) or not prefix.startswith(piece, len(text)):
            return ids[:count], prefix[len(text):]
        text += piece
    return tok.encode(prefix), ""


def _decode(model: LoadedModel, rows: torch.Tensor, overlap: str = "") -> list[str]:
    """Cut each row at its first pad/EOS, decode it, and drop the healed prefix tail it repeats."""
    stops = model.special.stop_ids
    texts = []
    for row in rows.tolist():
        cut = next((i for i, tok in enumerate(row) if tok in stops), len(row))
        text = model.tokenizer.decode(row[:cut])
        texts.append(text[len(overlap):] if text.startswith(overlap) else text)
    return texts


def fill(model: LoadedModel, request: FillRequest, cancel: CancelCheck | None = None,
         progress: Progress | None = None) -> FillResult:
    tok, special = model.tokenizer, model.special
    denoiser = Denoiser(request.sampler, special, model.device, cancel, progress)
    region = min(request.max_tokens, model.window // 2)
    (prefix, overlap), suffix = heal_prefix(tok, request.prefix), tok.encode(request.suffix)
    if model.attention == "bidirectional":
        prefix, suffix = _fit_context(prefix, suffix, model.window - region)
        row = [*prefix, *([special.mask_id] * region), *suffix]
        x = torch.tensor([row] * request.candidates, dtype=torch.long, device=model.device)
        lo = len(prefix)
        fill_in_place(model.lm, x, lo, lo + region, denoiser)
        return FillResult(_decode(model, x[:, lo:lo + region], overlap), denoiser.model_calls)
    fim_prefix, fim_suffix, fim_middle = special.fim_prefix_id, special.fim_suffix_id, special.fim_middle_id
    if fim_prefix is None or fim_suffix is None or fim_middle is None:
        raise ModelLoadError(f"{model.name}: its tokenizer has no fill-in-the-middle tokens")
    causal = model.attention == "causal"
    block = 1 if causal else model.lm.config.block_size
    prefix, suffix = _fit_context(prefix, suffix, model.window - region - 3 - block)
    prompt = [fim_prefix, *prefix, fim_suffix, *suffix, fim_middle]
    generate = generate_causal if causal else generate_blocks
    ids = generate(model.lm, prompt, request.candidates, region, denoiser, special.stop_ids)
    return FillResult(_decode(model, ids, overlap), denoiser.model_calls)
