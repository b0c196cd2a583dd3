"""Denoising loops: turn a canvas of mask tokens into text, a few tokens per model call.

Every loop is the same step repeated: run the model, sample a token and its confidence at each masked
position of the active window, commit some of them, leave the rest masked. What differs is which
positions are committed (the most confident `k`; or all above a threshold; or, entropy-bounded, the most
confident ones while their summed uncertainty stays small), and which window is active (the whole region
at once, or block by block left to right). The adaptive rules spend few model calls where the model is
sure and more where it is not, between a floor (`min_steps`: never more than an even share of the window
per call before then) and a ceiling (`steps`: at least an even share of what is left per call). A
cancellation check runs before every model call, so a cancelled request stops within one step.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial

import torch
from torch import Tensor

from dice_lsp.engine.model import DiffusionLM
from dice_lsp.engine.sampler_config import SamplerConfig
from dice_lsp.engine.tokenizer import SpecialTokens
from dice_lsp.errors import Cancelled, DiceError

CancelCheck = Callable[[], bool]
StepProgress = Callable[[int], None]


class Denoiser:
    """State shared by the steps of one generation: RNG, banned ids, cancellation, step count."""

    def __init__(self, cfg: SamplerConfig, special: SpecialTokens, device: torch.device,
                 cancel: CancelCheck | None = None, progress: StepProgress | None = None) -> None:
        self.cfg = cfg
        self.mask_id = special.mask_id
        self.banned = torch.tensor(special.never_generated, dtype=torch.long, device=device)
        self.stops = torch.tensor(sorted(special.stop_ids), dtype=torch.long, device=device)
        self.generator = torch.Generator(device=device).manual_seed(cfg.seed)
        self.cancel = cancel
        self.progress = progress
        self.model_calls = 0
        self.entropy: Tensor | None = None  # per position, of the last `sample` (entropy-bounded strategy)
        self.logp: Tensor | None = None  # log-probability of each committed token, by column; NaN: not sampled

    def record(self, x: Tensor, lo: int, hi: int, chosen: Tensor, confidence: Tensor) -> None:
        """Keep the log-probability of the tokens committed at x[:, lo:hi] (the candidates' scores)."""
        if self.logp is None or self.logp.shape[0] != x.shape[0] or self.logp.shape[1] > x.shape[1]:
            self.logp = torch.full(x.shape, math.nan, device=x.device)
        elif self.logp.shape[1] < x.shape[1]:  # autoregressive rows grow a token per call
            grown = torch.full((x.shape[0], x.shape[1] - self.logp.shape[1]), math.nan, device=x.device)
            self.logp = torch.cat((self.logp, grown), dim=1)
        window = self.logp[:, lo:hi]
        self.logp[:, lo:hi] = torch.where(chosen, confidence.float().clamp_min(1e-30).log(), window)

    def raise_if_cancelled(self) -> None:
        """Called before every model call: stop here if the caller cancelled."""
        if self.cancel is not None and self.cancel():
            raise Cancelled(f"cancelled after {self.model_calls} model calls")

    def count_call(self) -> None:
        self.model_calls += 1
        if self.progress is not None:
            self.progress(self.model_calls)

    def sample(self, logits: Tensor) -> tuple[Tensor, Tensor]:
        """A token and its probability at every position of `logits` [B, T, V] (and, for the entropy-bounded
        strategy, each position's entropy in `self.entropy`)."""
        logits = logits.float()
        logits[..., self.banned] = -math.inf
        if self.cfg.strategy == "entropy":
            logp = torch.log_softmax(logits, dim=-1)
            self.entropy = -(logp.exp() * logp.nan_to_num(neginf=0.0)).sum(dim=-1)
        if self.cfg.temperature == 0.0:
            probs = torch.softmax(logits, dim=-1)
            confidence, tokens = probs.max(dim=-1)
            return tokens, confidence
        logits = logits / self.cfg.temperature
        if self.cfg.top_k:
            kth = torch.topk(logits, min(self.cfg.top_k, logits.shape[-1]), dim=-1).values[..., -1:]
            logits = logits.masked_fill(logits < kth, -math.inf)
        probs = torch.softmax(logits, dim=-1)
        flat = torch.multinomial(probs.view(-1, probs.shape[-1]), 1, generator=self.generator)
        tokens = flat.view(probs.shape[:-1])
        return tokens, probs.gather(-1, tokens[..., None])[..., 0]

    def choose(self, tokens: Tensor, confidence: Tensor, masked: Tensor, steps_left: int,
               floor_left: int = 1) -> Tensor:
        """Which masked positions to commit now: per row, at least the ceil(remaining / steps_left) most
        confident; the adaptive strategies add the confident ones (see `SamplerConfig`), at most
        ceil(remaining / floor_left) of them (`floor_left`: calls left before the floor is met).

        Pad/EOS predictions compete like any other token: a confident pad is how a region ends early.
        (Ranking pads last made every low-confidence guess past the end of a line win over a confident
        pad: one-line fills ran on into the next statement; docs/MODEL.md has the measurement.)
        """
        remaining = masked.sum(dim=1, keepdim=True)
        quota = torch.div(remaining + steps_left - 1, steps_left, rounding_mode="floor")
        confidence = confidence.masked_fill(~masked, -math.inf)
        order = confidence.argsort(dim=1, descending=True)
        rank = order.argsort(dim=1)
        count = quota
        if self.cfg.strategy == "threshold":
            count = torch.maximum(count, ((confidence > self.cfg.threshold) & masked).sum(dim=1, keepdim=True))
        elif self.cfg.strategy == "entropy" and self.entropy is not None:
            entropy = self.entropy.masked_fill(~masked, 0.0).gather(1, order)  # most confident first
            spent = entropy.cumsum(dim=1) - entropy.cummax(dim=1).values  # all but the most uncertain
            count = torch.maximum(count, (spent <= self.cfg.entropy_bound).sum(dim=1, keepdim=True))
        if floor_left > 1:
            count = torch.maximum(quota, torch.minimum(count, torch.div(
                remaining + floor_left - 1, floor_left, rounding_mode="floor")))
        return (rank < count) & masked

    def denoise(self, x: Tensor, lo: int, hi: int, logits_of: Callable[[Tensor], Tensor]) -> None:
        """Fill the masks of x[:, lo:hi] in place; `logits_of(x)` returns logits for columns lo..hi."""
        for step in range(self.cfg.steps):
            if not bool((x[:, lo:hi] == self.mask_id).any()):
                return
            self.raise_if_cancelled()
            self.commit(x, lo, hi, logits_of(x), step)

    def commit(self, x: Tensor, lo: int, hi: int, logits: Tensor, step: int) -> None:
        """One denoising step of x[:, lo:hi] from `logits` (its columns' logits): sample, choose, commit.

        `step` counts the window's earlier steps; a scheduler that batches several generations' calls
        (`engine.continuous`) runs each generation's steps through here, as `denoise` does."""
        masked = x[:, lo:hi] == self.mask_id
        self.count_call()
        tokens, confidence = self.sample(logits)
        chosen = self.choose(tokens, confidence, masked, self.cfg.steps - step, self.cfg.min_steps - step)
        x[:, lo:hi] = torch.where(chosen, tokens, x[:, lo:hi])
        self.record(x, lo, hi, chosen, confidence)


@torch.inference_mode()
def fill_in_place(lm: DiffusionLM, x: Tensor, lo: int, hi: int, denoiser: Denoiser,
                  valid: Tensor | None = None, share_context: bool = False) -> Tensor:
    """Bidirectional models: every position sees the whole canvas, suffix included.

    `share_context`: rows that differ only inside the window (the same hole with canvases of several
    lengths, written as pads forced at the tail) share the context's keys and values, computed once per
    context with every window position masked (the context cache's own approximation, applied to them all).

    `valid` ([B, T] bool) marks the real tokens of rows padded to a common length (a batch of requests).
    """
    block = denoiser.cfg.block_length or (hi - lo)
    for start in range(lo, hi, block):
        end = min(start + block, hi)
        if denoiser.cfg.context_cache:
            cache = _ContextCache(lm, valid, denoiser.mask_id if share_context else None)
            denoiser.denoise(x, start, end, partial(cache.logits, start, end))
        else:
            denoiser.denoise(x, start, end, partial(_window_logits, lm, start, end, valid))
    return x


class _ContextCache:
    """Bidirectional denoising that runs the whole sequence once, then the window alone.

    Rows that start out equal (the candidates of one request) run the first call once and share its keys.
    """

    def __init__(self, lm: DiffusionLM, valid: Tensor | None, shared_mask: int | None = None,
                 origin: int = 0) -> None:
        self.lm = lm
        self.valid = valid
        self.shared_mask = shared_mask  # set: rows equal outside the window share one first call, all masks
        self.origin = origin  # the position of column 0 (rotary attention sees only differences)
        self.cache: object = None

    def logits(self, lo: int, hi: int, ids: Tensor) -> Tensor:
        if self.cache is None:
            cache = self.lm.new_cache()
            if self.shared_mask is not None:
                ids = ids.clone()
                ids[:, lo:hi] = self.shared_mask
            unique, inverse = torch.unique(ids, dim=0, return_inverse=True) if hasattr(cache, "select") else (ids, None)
            if inverse is not None and unique.shape[0] < ids.shape[0]:
                first = torch.zeros(unique.shape[0], dtype=torch.long, device=ids.device)  # a row of each kind
                first.scatter_(0, inverse, torch.arange(ids.shape[0], device=ids.device))
                valid = None if self.valid is None else self.valid[first]
                out = self.lm(unique, self.origin, cache, keep=ids.shape[1], only=slice(lo, hi), valid_keys=valid)
                cache.select(inverse)
                out = out[inverse]
            else:
                out = self.lm(ids, self.origin, cache, keep=ids.shape[1], only=slice(lo, hi), valid_keys=self.valid)
            cache.drop(lo, hi)
            self.cache = cache
            if self.valid is not None:  # keys are now the context without the window, then the window
                self.valid = torch.cat((self.valid[:, :lo], self.valid[:, hi:], self.valid[:, lo:hi]), dim=1)
            return out
        return self.lm(ids[:, lo:hi], lo + self.origin, self.cache, valid_keys=self.valid)


def _window_logits(lm: DiffusionLM, lo: int, hi: int, valid: Tensor | None, ids: Tensor) -> Tensor:
    """Logits of columns lo..hi, recomputing the whole sequence up to `hi` (bidirectional: all of it)."""
    end = ids.shape[1] if lm.config.attention == "bidirectional" else hi
    return lm(ids[:, :end], only=slice(lo, hi), valid_keys=None if valid is None else valid[:, :end])


class _CachedBlocks:
    """Logits of the block being denoised, attending to the cache of finished blocks.

    Finished positions that are not cached yet (the prompt's whole blocks, the block just decoded) ride
    along with the next denoising call and are kept in the cache on the way: storing a block costs no
    extra model call.
    """

    def __init__(self, lm: DiffusionLM) -> None:
        self.lm = lm
        self.cache = lm.new_cache()
        self.cached = 0

    def logits(self, lo: int, hi: int, ids: Tensor) -> Tensor:
        start = self.cached
        out = self.lm(ids[:, start:hi], start, self.cache, keep=lo - start, only=slice(lo - start, hi - start))
        self.cached = lo
        return out


@torch.inference_mode()
def generate_blocks(lm: DiffusionLM, prompt: list[int], candidates: int, max_new_tokens: int,
                    denoiser: Denoiser, stop_ids: set[int], use_cache: bool = True,
                    initial: Tensor | None = None) -> Tensor:
    """Block-diffusion models: decode block after block behind a prompt; returns the generated ids.

    The prompt's tail shares the first decoded block with masks (as SDAR does). Without the cache every
    step recomputes the whole sequence (the same logits; kept to check the cache and to measure it).
    Stops once every candidate has produced a stop token, unless `initial` ([candidates, region] ids, some
    of them masks) holds a draft: then every block of it is denoised.
    """
    size = lm.config.block_size
    device = denoiser.banned.device
    n_prompt = len(prompt)
    total = -(-(n_prompt + max_new_tokens) // size) * size
    if total > lm.config.max_position_embeddings:
        raise DiceError(f"prompt and region ({total} tokens) exceed the model window")
    x = torch.full((candidates, total), denoiser.mask_id, dtype=torch.long, device=device)
    x[:, :n_prompt] = torch.tensor(prompt, dtype=torch.long, device=device)
    if initial is not None:
        x[:, n_prompt:n_prompt + initial.shape[1]] = initial
    cached = _CachedBlocks(lm) if use_cache else None
    stops = torch.tensor(sorted(stop_ids), device=device)
    end = n_prompt
    for block in range(n_prompt // size, total // size):
        lo, end = block * size, (block + 1) * size
        if cached is not None:
            denoiser.denoise(x, lo, end, partial(cached.logits, lo, end))
        else:
            denoiser.denoise(x, lo, end, partial(_window_logits, lm, lo, end, None))
        if initial is None and bool(torch.isin(x[:, n_prompt:end], stops).any(dim=1).all()):
            break
    return x[:, n_prompt:end] if initial is None else x[:, n_prompt:n_prompt + max_new_tokens]


@torch.inference_mode()
def generate_causal(lm: DiffusionLM, prompt: list[int], candidates: int, max_new_tokens: int,
                    denoiser: Denoiser, stop_ids: set[int]) -> Tensor:
    """Autoregressive models: one token per model call behind the prompt, with a KV cache.

    Position i's logits predict token i+1 (the usual shift). Stops once every candidate has produced a
    stop token; the rows keep whatever follows a candidate's stop (the decoder cuts there).
    """
    device = denoiser.banned.device
    if len(prompt) + max_new_tokens > lm.config.max_position_embeddings:
        raise DiceError(f"prompt and region ({len(prompt) + max_new_tokens} tokens) exceed the model window")
    cache = lm.new_cache()
    step_input = torch.tensor([prompt] * candidates, dtype=torch.long, device=device)
    stops = torch.tensor(sorted(stop_ids), device=device)
    out = torch.empty((candidates, 0), dtype=torch.long, device=device)
    position = 0
    for _ in range(max_new_tokens):
        denoiser.raise_if_cancelled()
        length = step_input.shape[1]
        logits = lm(step_input, position, cache, keep=length, only=slice(length - 1, length))
        denoiser.count_call()
        position += length
        tokens, confidence = denoiser.sample(logits)
        out = torch.cat((out, tokens), dim=1)
        denoiser.record(out, out.shape[1] - 1, out.shape[1], torch.ones_like(tokens, dtype=torch.bool), confidence)
        if bool(torch.isin(out, stops).any(dim=1).all()):
            break
        step_input = tokens
    return out
