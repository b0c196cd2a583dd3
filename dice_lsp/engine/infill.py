"""Fill a region between a prefix and a suffix, the way each model family does it.

Bidirectional models fill in place: prefix + a canvas of masks + suffix in one sequence; pad/EOS tokens
let the fill end before the canvas does. Block-diffusion models cannot see a suffix that comes after
the canvas, so the prefix and suffix go into a fill-in-the-middle prompt and the middle is generated
block by block until a stop token (how DICE fills kernels); causal (autoregressive) models take the same
prompt and generate the middle a token at a time.

A region may also hold a draft: text already written there, of which some tokens are masked again and
denoised (an edit in place: re-noising a kernel body, re-writing the lines a compiler rejected). Only the
diffusion families can do this; pad/EOS anywhere in a re-denoised draft delete that position.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import torch

from dice_lsp.engine import contexts
from dice_lsp.engine.fill_types import CancelCheck, Draft, FillRequest, FillResult, StepProgress
from dice_lsp.engine.model import LoadedModel
from dice_lsp.engine.sampler_config import SamplerConfig
from dice_lsp.engine.sampling import (
    Denoiser,
    block_layout,
    fill_in_place,
    generate_blocks,
    generate_blocks_batch,
    generate_causal,
)
from dice_lsp.engine.tokenizer import Tokenizer
from dice_lsp.engine.transformer import Transformer
from dice_lsp.engine.window_graph import window_logits
from dice_lsp.errors import DiceError, ModelLoadError


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
    A character outside ASCII (`é`, a zero-width space in a comment) may take several byte-level tokens,
    each of which alone decodes to a replacement character: they are matched as one run, so such a
    character anywhere in the file does not end the healed prefix there (which left the model only the
    text before it, and the rest as a "tail" to rewrite).
    """
    ids = tok.encode(prefix + HEALING_SENTINEL)
    text, start = "", 0  # the text of ids[:start], matched against the prefix
    for count in range(len(ids)):
        piece = tok.decode(ids[start:count + 1])
        fits = len(text) + len(piece) <= len(prefix) and prefix.startswith(piece, len(text))
        if not fits and "\ufffd" in piece and count + 1 < len(ids):
            continue  # part of a character: the run goes on
        if not fits:
            return ids[:start], prefix[len(text):]
        text, start = text + piece, count + 1
    return tok.encode(prefix), ""


def draft_rows(model: LoadedModel, draft: Draft, overlap: str, rows: int, seed: int) -> torch.Tensor:
    """The draft's tokens, per row, with its spans (plus `grow` masks each) and a random `noise` share masked.

    `overlap` (the healed prefix tail) opens the draft, as it opens a fill.
    """
    text = overlap + draft.text
    ids, starts = model.tokenizer.encode(text), model.tokenizer.token_starts(text)
    ends = [*starts[1:], len(text)]
    spans = [(lo + len(overlap), hi + len(overlap)) for lo, hi in draft.spans]
    in_span = [any(s < hi and e > lo for lo, hi in spans) for s, e in zip(starts, ends, strict=True)]
    mask_id = model.special.mask_id
    inserts = {lo for lo, hi in spans if lo == hi}
    layout: list[int] = [-1] * draft.grow if 0 in inserts else []  # -1: masked in every row
    for index, (token, masked) in enumerate(zip(ids, in_span, strict=True)):
        layout.append(-1 if masked else token)
        if (masked and (index + 1 == len(ids) or not in_span[index + 1])) or ends[index] in inserts:
            layout.extend([-1] * draft.grow)
    base = torch.tensor(layout, dtype=torch.long)
    generator = torch.Generator().manual_seed(seed)
    noise = torch.rand((rows, len(layout)), generator=generator) < draft.noise
    out = base.repeat(rows, 1)
    out[noise | (out < 0)] = mask_id
    return out.to(model.device)


def after_overlap(text: str, overlap: str) -> str:
    """What of a decoded region follows the text the user typed, given the healed prefix tail `overlap` the
    model wrote the region from.

    A region that starts with the tail goes on after it. One that does not has rewritten the tail, and is
    placed after the typed text whole (a model that ignores a healed space or a closing word is often right:
    `N + i` typed, `) = col_sum[i];` written), except where that would glue its first word onto the word the
    user is typing (`_storage` typed, healed tail `e`, the model wrote `or = 0;` after `_storag`: shown, it
    reads `_storageor = 0;`, a name nobody wrote): that region has nothing to show ("")."""
    if text.startswith(overlap):
        return text[len(overlap):]
    glued = re.match(r"\w", text) is not None and re.search(r"\w\Z", overlap) is not None
    return "" if glued else text


def _decode(model: LoadedModel, rows: torch.Tensor, overlap: str = "", edited: bool = False) -> list[str]:
    """Cut each row at its first pad/EOS (an edited draft: drop them all), decode it, and drop the healed
    prefix tail it repeats (`after_overlap`)."""
    stops = model.special.stop_ids
    texts = []
    for row in rows.tolist():
        if edited:
            row = [tok for tok in row if tok not in stops]
        cut = next((i for i, tok in enumerate(row) if tok in stops), len(row))
        texts.append(after_overlap(model.tokenizer.decode(row[:cut]), overlap))
    return texts


def _scores(model: LoadedModel, rows: torch.Tensor, logp: torch.Tensor | None) -> list[float]:
    """Each row's mean log-probability of its committed tokens up to and with its first stop token."""
    if logp is None:
        return [math.nan] * rows.shape[0]
    stops = torch.tensor(sorted(model.special.stop_ids), device=rows.device)
    is_stop = torch.isin(rows, stops)
    after_stop = (is_stop.cumsum(dim=1) - is_stop.long()) > 0
    counted = ~after_stop & ~logp.isnan()
    total = torch.where(counted, logp, torch.zeros_like(logp)).sum(dim=1)
    return (total / counted.sum(dim=1).clamp_min(1)).tolist()


def region_of(model: LoadedModel, request: FillRequest, initial: torch.Tensor | None = None) -> int:
    """The region's size in tokens: the request's canvas (a draft: its tokens), within half the window."""
    region = min(request.max_tokens, model.window // 2) if initial is None else initial.shape[1]
    if region > model.window - 8:
        raise DiceError(f"the region ({region} tokens) does not fit the model window ({model.window} tokens)")
    return region


def batch_key(model: LoadedModel, request: FillRequest) -> tuple[int | str, SamplerConfig] | None:
    """Requests with equal keys can share one denoising batch (`fill_batch`); None: this one cannot.

    In-place fills of a bidirectional model batch when their regions are the same size and they sample
    the same way: rows are padded to one length around an aligned region. Fills of the native
    block-diffusion transformer (SDAR/DICE checkpoints) batch when they sample the same way, whatever their
    prompts and regions: rows are padded by whole blocks (`sampling.generate_blocks_batch`); so do their
    drafts (re-masking rounds: every block denoised, no stop), apart from fills. Causal models, and the
    drafts of in-place fills (which differ per request), run alone.
    """
    if model.attention == "block" and isinstance(model.lm, Transformer):
        return "block drafts" if request.draft is not None else "blocks", request.sampler
    if request.draft is not None or model.attention != "bidirectional":
        return None
    return region_of(model, request, None), request.sampler


def batch_rows(model: LoadedModel, request: FillRequest) -> int:
    """Rows of a denoising batch `request` takes: per canvas its candidates in place; a block-diffusion fill
    generates its region once per candidate (canvas lengths are for in-place fills)."""
    return request.candidates if model.attention == "block" else request.rows


def _canvases(model: LoadedModel, request: FillRequest) -> tuple[int, ...]:
    region = region_of(model, request, None)
    return tuple(sorted({min(length, region) for length in request.canvases}))


def fill_batch(model: LoadedModel, requests: list[FillRequest], cancel: CancelCheck | None = None,
               progress: StepProgress | None = None) -> list[FillResult]:
    """Fill several regions (all with one `batch_key`) as one batch: each request's candidates (per canvas)
    are rows, left-padded so that every region starts at the same column; padding is never attended, so a
    row's fill is the one it gets alone (the same with greedy decoding; sampled rows draw from one
    generator). A canvas shorter than the batch's region is the region with its tail forced to pads (the
    model saw such canvases in training: a hole's tokens, then pads); the suffix stays where it is, so every
    canvas of a request shares one context, computed once (`fill_in_place`'s `share_context`)."""
    keys = {batch_key(model, request) for request in requests}
    if len(keys) != 1 or None in keys:
        raise DiceError("only fills of one batch key (model kind, region size, sampler) share a batch")
    if model.attention == "block":
        return _block_batch(model, requests, Denoiser(requests[0].sampler, model.special, model.device, cancel,
                                                      progress))
    region, sampler = region_of(model, requests[0], None), requests[0].sampler
    parts = [in_place_context(model, request, region) for request in requests]
    lo = max(len(prefix) for prefix, _, _ in parts)
    total = lo + region + max(len(suffix) for _, suffix, _ in parts)
    rows, valid = [], []
    for (prefix, suffix, _), request in zip(parts, requests, strict=True):
        ids, real = in_place_rows(model, request, region, prefix, suffix, lo - len(prefix), total)
        rows += ids
        valid += real
    x = torch.tensor(rows, dtype=torch.long, device=model.device)
    padded = torch.tensor(valid, dtype=torch.bool, device=model.device)
    denoiser = Denoiser(sampler, model.special, model.device, cancel, progress)
    fill_in_place(model.lm, x, lo, lo + region, denoiser, None if bool(padded.all()) else padded, share_context=True)
    results, row = [], 0
    for (_, _, overlap), request in zip(parts, requests, strict=True):
        here = slice(row, row + request.rows)
        logp = None if denoiser.logp is None else denoiser.logp[here, lo:lo + region]
        results.append(in_place_result(model, request, x[here, lo:lo + region], logp, overlap, denoiser.model_calls))
        row += request.rows
    return results


def in_place_context(model: LoadedModel, request: FillRequest, region: int) -> tuple[list[int], list[int], str]:
    """An in-place fill's prefix and suffix tokens (fitted to the window around `region`), and the healed
    prefix tail that opens the fill."""
    tok = model.tokenizer
    (prefix, overlap), suffix = heal_prefix(tok, request.prefix), tok.encode(request.suffix)
    prefix, suffix = _fit_context(prefix, suffix, model.window - region)
    return prefix, suffix, overlap


def in_place_rows(model: LoadedModel, request: FillRequest, region: int, prefix: list[int], suffix: list[int],
                  before: int, total: int) -> tuple[list[list[int]], list[list[bool]]]:
    """The request's rows (per canvas, its candidates) `total` tokens long, `before` pads first, and which
    of their tokens are real."""
    special = model.special
    real = len(prefix) + region + len(suffix)
    after = total - before - real
    rows, valid = [], []
    for canvas in _canvases(model, request):
        window = [special.mask_id] * canvas + [special.pad_id] * (region - canvas)  # shorter: ends in pads
        ids = [special.pad_id] * before + prefix + window + suffix + [special.pad_id] * after
        rows += [ids] * request.candidates
        valid += [[False] * before + [True] * real + [False] * after] * request.candidates
    return rows, valid


def in_place_result(model: LoadedModel, request: FillRequest, region: torch.Tensor, logp: torch.Tensor | None,
                    overlap: str, model_calls: int) -> FillResult:
    """The request's result from its rows' filled region ([rows, region]) and their tokens' log-probabilities."""
    texts, scores, canvases, row = [], [], [], 0
    for canvas in _canvases(model, request):
        here = slice(row, row + request.candidates)
        texts += _decode(model, region[here, :canvas], overlap)
        scores += _scores(model, region[here, :canvas], None if logp is None else logp[here, :canvas])
        canvases += [canvas] * request.candidates
        row += request.candidates
    return FillResult(texts, model_calls, scores, canvases)


def _over_kept_context(model: LoadedModel, request: FillRequest, initial: torch.Tensor, denoiser: Denoiser,
                       prefix: list[int], suffix: list[int], overlap: str) -> FillResult | None:
    """A draft of the hole an in-place fill just filled (a re-masking round), re-denoised over that fill's
    context keys (`contexts`): the draft in the fill's canvas, its tail pads (as a short canvas ends), window
    steps only. None when they are not kept (another process, evicted, not a fill's hole) or do not apply."""
    region = region_of(model, request, None)
    sampler = request.sampler
    if (request.draft is None or not request.draft.over_fill or model.attention != "bidirectional"
            or not sampler.context_cache or initial.shape[1] > region or (sampler.block_length or region) < region):
        return None
    prefix, suffix = _fit_context(prefix, suffix, model.window - region)
    lo, special = len(prefix), model.special
    masked = torch.tensor([*prefix, *([special.mask_id] * region), *suffix], dtype=torch.long, device=model.device)
    found = contexts.find(model.lm, masked, lo, lo + region, -lo)  # kept with the region at 0 (`fill_in_place`)
    if found is None:
        return None
    x = masked.repeat(initial.shape[0], 1)
    x[:, lo:lo + initial.shape[1]] = initial
    x[:, lo + initial.shape[1]:lo + region] = special.pad_id
    cache, start = found.rows(x.shape[0]), lo + found.origin

    def logits_of(ids: torch.Tensor) -> torch.Tensor:
        return window_logits(model.lm, ids[:, lo:lo + region], start, cache, None)

    with torch.inference_mode():
        denoiser.denoise(x, lo, lo + region, logits_of)
    rows = x[:, lo:lo + region]
    logp = None if denoiser.logp is None else denoiser.logp[:, lo:lo + region]
    return FillResult(_decode(model, rows, overlap, True), denoiser.model_calls, _scores(model, rows, logp),
                      [region] * initial.shape[0])


def fill(model: LoadedModel, request: FillRequest, cancel: CancelCheck | None = None,
         progress: StepProgress | None = None) -> FillResult:
    if batch_key(model, request) is not None:
        return fill_batch(model, [request], cancel, progress)[0]
    tok, special = model.tokenizer, model.special
    denoiser = Denoiser(request.sampler, special, model.device, cancel, progress)
    (prefix, overlap), suffix = heal_prefix(tok, request.prefix), tok.encode(request.suffix)
    draft = request.draft
    if draft is not None and model.attention == "causal":
        raise DiceError(f"{model.name}: an autoregressive model cannot re-denoise a draft; use a diffusion model")
    initial = None if draft is None else draft_rows(model, draft, overlap, request.candidates, request.sampler.seed)
    region = region_of(model, request, initial)
    if initial is not None and (again := _over_kept_context(model, request, initial, denoiser, prefix, suffix,
                                                             overlap)) is not None:
        return again
    if model.attention == "bidirectional" and initial is not None:  # a draft re-denoised in place
        prefix, suffix = _fit_context(prefix, suffix, model.window - region)
        row = [*prefix, *([special.mask_id] * region), *suffix]
        x = torch.tensor([row] * request.candidates, dtype=torch.long, device=model.device)
        lo = len(prefix)
        x[:, lo:lo + region] = initial
        fill_in_place(model.lm, x, lo, lo + region, denoiser)
        rows = x[:, lo:lo + region]
        logp = None if denoiser.logp is None else denoiser.logp[:, lo:lo + region]
        return FillResult(_decode(model, rows, overlap, True), denoiser.model_calls, _scores(model, rows, logp),
                          [region] * request.candidates)
    prompt = _fim_prompt(model, prefix, suffix, region)
    if model.attention == "causal":
        ids = generate_causal(model.lm, prompt, request.candidates, region, denoiser, special.stop_ids)
        logp = denoiser.logp
    else:
        ids = generate_blocks(model.lm, prompt, request.candidates, region, denoiser, special.stop_ids, initial=initial)
        logp = None if denoiser.logp is None else denoiser.logp[:, len(prompt):len(prompt) + ids.shape[1]]
    return FillResult(_decode(model, ids, overlap, draft is not None), denoiser.model_calls,
                      _scores(model, ids, logp), [region] * request.candidates)


def _fim_prompt(model: LoadedModel, prefix: list[int], suffix: list[int], region: int) -> list[int]:
    """A block-diffusion or causal model's fill-in-the-middle prompt, the context fitted to the window."""
    special = model.special
    fim_prefix, fim_suffix, fim_middle = special.fim_prefix_id, special.fim_suffix_id, special.fim_middle_id
    if fim_prefix is None or fim_suffix is None or fim_middle is None:
        raise ModelLoadError(f"{model.name}: its tokenizer has no fill-in-the-middle tokens")
    block = 1 if model.attention == "causal" else model.lm.config.block_size
    prefix, suffix = _fit_context(prefix, suffix, model.window - region - 3 - block)
    return [fim_prefix, *prefix, fim_suffix, *suffix, fim_middle]


@dataclass(frozen=True)
class BlockPrompt:
    """A block-diffusion fill as its batch needs it: the fill-in-the-middle prompt, the region's width, the
    healed prefix tail that opens the fill, and a draft's rows ([candidates, region] ids, some masks) or None."""

    ids: list[int]
    region: int
    overlap: str
    initial: torch.Tensor | None


def block_prompt(model: LoadedModel, request: FillRequest) -> BlockPrompt:
    tok = model.tokenizer
    (prefix, overlap), suffix = heal_prefix(tok, request.prefix), tok.encode(request.suffix)
    draft = request.draft
    initial = None if draft is None else draft_rows(model, draft, overlap, request.candidates, request.sampler.seed)
    region = region_of(model, request, initial)
    return BlockPrompt(_fim_prompt(model, prefix, suffix, region), region, overlap, initial)


def block_result(model: LoadedModel, request: FillRequest, prompt: BlockPrompt, ids: torch.Tensor,
                 logp: torch.Tensor | None, model_calls: int) -> FillResult:
    """A block-diffusion fill's result from its generated ids ([candidates, n]) and their log-probabilities."""
    return FillResult(_decode(model, ids, prompt.overlap, request.draft is not None), model_calls,
                      _scores(model, ids, logp), [prompt.region] * request.candidates)


def _block_batch(model: LoadedModel, requests: list[FillRequest], denoiser: Denoiser) -> list[FillResult]:
    """Block-diffusion fills of several requests as one batch (`generate_blocks_batch`); a batch whose padded
    layout would not fit the window runs its requests one after another."""
    prompts = [block_prompt(model, request) for request in requests]
    ids, regions = [prompt.ids for prompt in prompts], [prompt.region for prompt in prompts]
    pads, ends = block_layout(ids, regions, model.lm.config.block_size)
    if len(requests) > 1 and max(ends) > model.window:
        return [fill(model, request, denoiser.cancel, denoiser.progress) for request in requests]
    initials = [prompt.initial for prompt in prompts if prompt.initial is not None]
    outs = generate_blocks_batch(model.lm, ids, [request.candidates for request in requests], regions, denoiser,
                                 model.special.stop_ids, initials=initials or None)
    results, row = [], 0
    for request, out, prompt, pad in zip(requests, outs, prompts, pads, strict=True):
        here, begin = slice(row, row + request.candidates), pad + len(prompt.ids)
        logp = None if denoiser.logp is None else denoiser.logp[here, begin:begin + out.shape[1]]
        results.append(block_result(model, request, prompt, out, logp, denoiser.model_calls))
        row += request.candidates
    return results


def answer(model: LoadedModel, prompt: str, max_tokens: int, candidates: int, sampler: SamplerConfig,
           cancel: CancelCheck | None = None) -> FillResult:
    """Continue `prompt` (an instruction in the checkpoint's chat format) until a stop token.

    For block-diffusion and autoregressive checkpoints, which are asked in words (DICE is prompted with the
    kernel and an instruction); a bidirectional model has no use for it.
    """
    if model.attention == "bidirectional":
        raise DiceError(f"{model.name}: a bidirectional model fills regions; it is not prompted")
    denoiser = Denoiser(sampler, model.special, model.device, cancel)
    ids = model.tokenizer.encode(prompt)
    room = model.window - max_tokens - model.lm.config.block_size
    if room < 1:
        raise DiceError(f"{max_tokens} tokens do not fit the model window ({model.window})")
    ids = ids[-room:]
    generate = generate_causal if model.attention == "causal" else generate_blocks
    rows = generate(model.lm, ids, candidates, max_tokens, denoiser, model.special.stop_ids)
    return FillResult(_decode(model, rows), denoiser.model_calls)
