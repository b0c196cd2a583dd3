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
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from functools import partial
from typing import Literal

import torch
from torch import Tensor

from dice_lsp.engine import contexts, window_graph
from dice_lsp.engine.block_graph import BlockStepper, block_stepper
from dice_lsp.engine.fill_types import CancelCheck, StepProgress
from dice_lsp.engine.model import DiffusionLM
from dice_lsp.engine.sampler_config import SamplerConfig
from dice_lsp.engine.tokenizer import SpecialTokens
from dice_lsp.engine.transformer import KVCache, Transformer
from dice_lsp.engine.window_graph import window_logits
from dice_lsp.errors import Cancelled, DiceError

BlockStep = Literal["auto", "dynamic", "static", "graph"]
Rows = slice | Tensor  # rows of a block batch: a slice where contiguous (indexing then sends nothing), else indices


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
        logits.index_fill_(-1, self.banned, -math.inf)  # a scalar fill: no host-to-device copy, no wait
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

    def choose(self, tokens: Tensor, confidence: Tensor, masked: Tensor, steps_left: int | Tensor,
               floor_left: int | Tensor = 1) -> Tensor:
        """Which masked positions to commit now: per row, at least the ceil(remaining / steps_left) most
        confident; the adaptive strategies add the confident ones (see `SamplerConfig`), at most
        ceil(remaining / floor_left) of them (`floor_left`: calls left before the floor is met). Both counts are
        ints, or [rows, 1] tensors where rows of generations at different steps are chosen together. Ties in
        confidence go to the leftmost position (a stable sort), so a row's choice does not depend on its batch.

        Pad/EOS predictions compete like any other token: a confident pad is how a region ends early.
        (Ranking pads last made every low-confidence guess past the end of a line win over a confident
        pad: one-line fills ran on into the next statement; docs/MODEL.md has the measurement.)
        """
        remaining = masked.sum(dim=1, keepdim=True)
        quota = torch.div(remaining + steps_left - 1, steps_left, rounding_mode="floor")
        confidence = confidence.masked_fill(~masked, -math.inf)
        order = confidence.argsort(dim=1, descending=True, stable=True)
        rank = order.argsort(dim=1)
        count = quota
        if self.cfg.strategy == "threshold":
            count = torch.maximum(count, ((confidence > self.cfg.threshold) & masked).sum(dim=1, keepdim=True))
        elif self.cfg.strategy == "entropy" and self.entropy is not None:
            entropy = self.entropy.masked_fill(~masked, 0.0).gather(1, order)  # most confident first
            spent = entropy.cumsum(dim=1) - entropy.cummax(dim=1).values  # all but the most uncertain
            count = torch.maximum(count, (spent <= self.cfg.entropy_bound).sum(dim=1, keepdim=True))
        if isinstance(floor_left, Tensor):
            floored = torch.maximum(quota, torch.minimum(count, torch.div(
                remaining + floor_left - 1, floor_left.clamp_min(1), rounding_mode="floor")))
            count = torch.where(floor_left > 1, floored, count)
        elif floor_left > 1:
            count = torch.maximum(quota, torch.minimum(count, torch.div(
                remaining + floor_left - 1, floor_left, rounding_mode="floor")))
        return (rank < count) & masked

    def denoise(self, x: Tensor, lo: int, hi: int, logits_of: Callable[[Tensor], Tensor],
                calls: int | None = None) -> None:
        """Fill the masks of x[:, lo:hi] in place; `logits_of(x)` returns logits for columns lo..hi.

        `calls`: how many model calls the window needs, when the caller knows it (`planned_calls`); then
        no step waits for the device to say whether masks are left.
        """
        for step in range(self.cfg.steps):
            if calls is None:
                if not bool((x[:, lo:hi] == self.mask_id).any()):
                    return
            elif step == calls:
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

    def commit_rows(self, x: Tensor, rows: Tensor, columns: Tensor, logits: Tensor, steps: Tensor,
                    logp: Tensor) -> None:
        """`commit` where each row denoises its own block (`rowwise.RowwiseBatch`): `rows` [n] of `x`, `columns`
        [n, size] the columns of each one's block, `logits` theirs, `steps` [n, 1] the calls each block has had;
        the committed tokens' log-probabilities go to `logp` (shaped as `x`)."""
        at = (rows[:, None], columns)
        window = x[at]
        masked = window == self.mask_id
        self.count_call()
        tokens, confidence = self.sample(logits)
        chosen = self.choose(tokens, confidence, masked, self.cfg.steps - steps, self.cfg.min_steps - steps)
        x[at] = torch.where(chosen, tokens, window)
        logp[at] = torch.where(chosen, confidence.float().clamp_min(1e-30).log(), logp[at])


@torch.inference_mode()
def fill_in_place(lm: DiffusionLM, x: Tensor, lo: int, hi: int, denoiser: Denoiser,
                  valid: Tensor | None = None, share_context: bool = False) -> Tensor:
    """Bidirectional models: every position sees the whole canvas, suffix included.

    `share_context`: rows that differ only inside the window (the same hole with canvases of several
    lengths, written as pads forced at the tail) share the context's keys and values, computed once per
    context with every window position masked (the context cache's own approximation, applied to them all).

    `valid` ([B, T] bool) marks the real tokens of rows padded to a common length (a batch of requests).

    The embedded transformer sees the region at position 0 (its prefix at negative positions), as the team
    server's step scheduler places every stream (`continuous.py`): rotary attention sees only differences, so
    this is the same attention up to float rounding, and the rounding is then the scheduler's too — a fill is
    the same whether it runs alone, left-padded in a batch, or as a stream (tests).
    """
    block = denoiser.cfg.block_length or (hi - lo)
    origin = -lo if isinstance(lm, Transformer) else 0  # only the embedded transformer takes negative positions
    for start in range(lo, hi, block):
        end = min(start + block, hi)
        if denoiser.cfg.context_cache:
            cache = _ContextCache(lm, valid, denoiser.mask_id if share_context else None, origin)
            denoiser.denoise(x, start, end, partial(cache.logits, start, end))
        else:
            denoiser.denoise(x, start, end, partial(_window_logits, lm, start, end, valid, origin=origin))
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
            return self._first(lo, hi, ids)
        if isinstance(self.cache, KVCache):  # the embedded transformer's: its window steps may run static
            return window_logits(self.lm, ids[:, lo:hi], lo + self.origin, self.cache, self.valid)
        return self.lm(ids[:, lo:hi], lo + self.origin, self.cache, valid_keys=self.valid)

    def _first(self, lo: int, hi: int, ids: Tensor) -> Tensor:
        """The window's first call: the whole sequence once (a static call where `window_graph.first_call`
        serves it), its context's keys kept for the window's later steps, and for a re-masking round of the
        same hole (`contexts`)."""
        if self.shared_mask is not None:
            ids = ids.clone()
            ids[:, lo:hi] = self.shared_mask
        keeps = self.shared_mask is not None and self.valid is None and isinstance(self.lm, Transformer)
        stackable = isinstance(self.lm, Transformer)  # a cache with `select` (rows of one kind run once)
        unique, inverse = torch.unique(ids, dim=0, return_inverse=True) if stackable else (ids, None)
        if inverse is not None and unique.shape[0] < ids.shape[0]:
            first = torch.zeros(unique.shape[0], dtype=torch.long, device=ids.device)  # a row of each kind
            first.scatter_(0, inverse, torch.arange(ids.shape[0], device=ids.device))
            valid = None if self.valid is None else self.valid[first]
            out, cache = self._run(unique, lo, hi, valid)
            if keeps:
                self._keep(unique, lo, hi, cache)
            assert isinstance(cache, KVCache)
            cache.select(inverse)
            out = out[inverse]
        else:
            out, cache = self._run(ids, lo, hi, self.valid)
            if keeps:
                self._keep(ids, lo, hi, cache)
        self.cache = cache
        if self.valid is not None:  # keys are now the context without the window, then the window
            self.valid = torch.cat((self.valid[:, :lo], self.valid[:, hi:], self.valid[:, lo:hi]), dim=1)
        return out

    def _run(self, ids: Tensor, lo: int, hi: int, valid: Tensor | None) -> tuple[Tensor, object]:
        """Logits of columns lo..hi and the context's keys, the window's dropped."""
        static = window_graph.first_call(self.lm, ids, self.origin, lo, hi, valid)
        if static is not None:
            return static
        cache = self.lm.new_cache()
        out = self.lm(ids, self.origin, cache, keep=ids.shape[1], only=slice(lo, hi), valid_keys=valid)
        if hasattr(cache, "drop"):
            cache.drop(lo, hi)
        return out, cache

    def _keep(self, rows: Tensor, lo: int, hi: int, cache: object) -> None:
        """Keep each of `rows`' context keys (`cache`'s rows, the window dropped) for a later fill of the same
        sequence (a re-masking round of the same hole)."""
        assert isinstance(cache, KVCache)
        for row in range(rows.shape[0]):
            contexts.keep(self.lm, rows[row], lo, hi, cache, row, self.origin)


def _window_logits(lm: DiffusionLM, lo: int, hi: int, valid: Tensor | None, ids: Tensor, origin: int = 0) -> Tensor:
    """Logits of columns lo..hi, recomputing the whole sequence up to `hi` (bidirectional: all of it); column 0
    at position `origin`."""
    end = ids.shape[1] if lm.config.attention == "bidirectional" else hi
    return lm(ids[:, :end], origin, only=slice(lo, hi), valid_keys=None if valid is None else valid[:, :end])


class _RecomputedBlocks:
    """Logits of the block being denoised, recomputing the whole sequence up to it at every step (no cache: the
    same logits as the caches give; kept to check them and to measure them)."""

    def __init__(self, lm: DiffusionLM, valid: Tensor | None) -> None:
        self.lm = lm
        self.valid = valid  # [rows, columns]: rows padded to one layout (`BlockBatch`)

    def logits_of(self, lo: int, hi: int) -> Callable[[Tensor], Tensor]:
        return partial(_window_logits, self.lm, lo, hi, self.valid)


class _CachedBlocks:
    """Logits of the block being denoised, attending to the cache of finished blocks.

    Finished positions that are not cached yet (the prompt's whole blocks, the block just decoded) ride
    along with the next denoising call and are kept in the cache on the way: storing a block costs no
    extra model call.
    """

    def __init__(self, lm: DiffusionLM, valid: Tensor | None = None) -> None:
        self.lm = lm
        self.cache = lm.new_cache()
        self.cached = 0
        self.valid = valid  # [rows, columns]: rows padded to one layout (`BlockBatch`)

    def logits_of(self, lo: int, hi: int) -> Callable[[Tensor], Tensor]:
        return partial(self.logits, lo, hi)

    def logits(self, lo: int, hi: int, ids: Tensor) -> Tensor:
        start = self.cached
        out = self.lm(ids[:, start:hi], start, self.cache, keep=lo - start, only=slice(lo - start, hi - start),
                      valid_keys=None if self.valid is None else self.valid[:, :hi])
        self.cached = lo
        return out


class _StaticBlocks:
    """Logits of the block being denoised through the static window step (`block_graph.BlockStepper`).

    The generation's first call runs positions 0..hi uncaptured (the prompt's blocks enter the cache);
    every later call runs the window of the block before and the block itself, replayed on CUDA. A block
    that needed no call (a draft's block without masks) leaves the block before it unwritten with its final
    tokens: the next call then runs uncaptured from the first such column (as `_CachedBlocks` catches up).
    """

    def __init__(self, lm: Transformer, stepper: BlockStepper) -> None:
        self.lm = lm
        self.stepper = stepper
        self.cached: int | None = None  # columns 0..cached hold their final keys; None: nothing of this generation
        self.valid = stepper.cache.valid  # the static mask's own [rows, max_len] (padded steppers)

    def logits_of(self, lo: int, hi: int) -> Callable[[Tensor], Tensor]:
        return partial(self.logits, lo, hi)

    def logits(self, lo: int, hi: int, ids: Tensor) -> Tensor:
        cached, self.cached = self.cached, lo
        if cached is None or lo == 0:
            return self.stepper.first(self.lm, ids, hi)
        if cached < lo - self.stepper.size:
            return self.stepper.first(self.lm, ids, hi, cached)
        return self.stepper.step(self.lm, ids, lo)


_BlockPath = _RecomputedBlocks | _CachedBlocks | _StaticBlocks


@contextmanager
def _block_logits(lm: DiffusionLM, path: BlockStep | Literal["recompute"], rows: int, total: int,
                  valid: Tensor | None = None) -> Iterator[_BlockPath]:
    """The keys a block generation keeps, by path; the static ones hold their stepper (its cache and graph) for
    the generation. `valid` ([rows, total] bool): the real columns of rows padded to one layout (`BlockBatch`);
    None: no padding."""
    if path == "recompute":
        yield _RecomputedBlocks(lm, valid)
    elif path == "dynamic":
        yield _CachedBlocks(lm, valid)
    else:
        assert isinstance(lm, Transformer)  # _block_path checked it
        with block_stepper(lm, rows, total, capture=path == "graph", padded=valid is not None) as stepper:
            stepper.cache.load_valid(valid)
            yield _StaticBlocks(lm, stepper)


def planned_calls(masked: list[int], steps: int) -> int:
    """Model calls the `low_confidence` strategy spends on a window whose rows hold `masked` masks.

    Each call commits exactly min(ceil(left / calls left), left) of a row's masks (`Denoiser.choose`: the
    quota, nothing more), so the count is known on the host and the loop need not ask the device.
    """
    left, calls = list(masked), 0
    while any(left) and calls < steps:
        left = [n - min(n, -(-n // (steps - calls))) for n in left]
        calls += 1
    return calls


def _block_path(lm: DiffusionLM, step: BlockStep, device: torch.device) -> BlockStep:
    """The cache a block generation uses: `auto` is the captured static step on CUDA, the dynamic cache
    elsewhere (on a CPU the window step's second block is extra work, not free); asked for, the static
    paths fail loudly where they cannot run."""
    native = isinstance(lm, Transformer) and lm.config.attention == "block"
    if step == "auto":
        return "graph" if native and device.type == "cuda" else "dynamic"
    if step in ("static", "graph") and not native:
        raise DiceError(f"the {step} block step needs the native block transformer, not {type(lm).__name__}")
    if step == "graph" and device.type != "cuda":
        raise DiceError(f"CUDA-graph block steps need a CUDA device, the generation runs on {device}")
    return step


@torch.inference_mode()
def generate_blocks(lm: DiffusionLM, prompt: list[int], candidates: int, max_new_tokens: int,
                    denoiser: Denoiser, stop_ids: set[int], use_cache: bool = True,
                    initial: Tensor | None = None, step: BlockStep = "auto") -> Tensor:
    """Block-diffusion models: decode block after block behind a prompt; returns the generated ids.

    The prompt's tail shares the first decoded block with masks (as SDAR does). Without the cache every
    step recomputes the whole sequence (the same logits; kept to check the cache and to measure it).
    With it, `step` picks the cache (`_block_path`): `dynamic` grows a `KVCache`; `static` runs the
    fixed-shape window step of `block_graph.py` over a preallocated cache, `graph` replays that step as a
    CUDA graph. The static paths wait for the device once per block (the stop check), not per step: the
    `low_confidence` strategy's calls per block are planned on the host (`planned_calls`, from the masks
    counted once before decoding); the adaptive strategies still ask the device after each step whether
    masks are left.
    Stops once every candidate has produced a stop token, unless `initial` ([candidates, region] ids, some
    of them masks) holds a draft: then every block of it is denoised.
    """
    return generate_blocks_batch(lm, [prompt], [candidates], [max_new_tokens], denoiser, stop_ids, use_cache,
                                 None if initial is None else [initial], step)[0]


def block_layout(prompts: list[list[int]], regions: list[int], size: int) -> tuple[list[int], list[int]]:
    """Where each prompt of a block-diffusion batch sits: its left padding and the column its generation ends.

    Padding is whole blocks, so every row keeps its own block boundaries; it is chosen so that every row's
    first decoded block (the one its prompt's tail shares) lies at one column. A row alone has no padding:
    its layout is `generate_blocks`'s.
    """
    firsts = [len(prompt) // size for prompt in prompts]
    pads = [(max(firsts) - first) * size for first in firsts]
    ends = [pad + -(-(len(prompt) + region) // size) * size for pad, prompt, region in zip(pads, prompts, regions,
                                                                                           strict=True)]
    return pads, ends


@dataclass(eq=False)
class BlockRows:
    """One request's rows in a `BlockBatch`: where they sit, and its generated ids once it is done."""

    rows: Rows  # its rows: a slice where they are contiguous (a view: no index sent to the device), else indices
    indices: list[int]  # the same, on the host (read between blocks without waiting for the device)
    start: int  # its first generated column
    end: int  # the column its generation ends at: its padding, prompt and region, rounded up to whole blocks
    region: int
    draft: bool  # a draft: every block of its region denoised, no stop
    ids: Tensor | None = None  # [candidates, n] once done: its columns start..where it finished


class BlockBatch:
    """Block-diffusion requests decoded block by block in one batch, every row's block at one column.

    Rows are left-padded by whole blocks (`block_layout`) so that every request's first decoded block (the one
    its prompt's tail shares) lies at one column; padding is never attended by real tokens. A request is done at
    the first block where all its rows have produced a stop token (or at its region's end; drafts: every block to
    their region's end). A batch has `capacity` rows and `length` columns, fixed when it is made (the static
    step's cache and graph are that shape). Fills that join a running batch at any step: `rowwise.RowwiseBatch`.
    """

    def __init__(self, lm: DiffusionLM, denoiser: Denoiser, stop_ids: set[int], capacity: int, length: int,
                 path: BlockStep | Literal["recompute"], padded: bool) -> None:
        if length > lm.config.max_position_embeddings:
            raise DiceError(f"prompt and region ({length} tokens) exceed the model window")
        self.lm, self.denoiser, self.size = lm, denoiser, lm.config.block_size
        self.capacity, self.length, self.path = capacity, length, path
        device = denoiser.banned.device
        self.x = torch.zeros((capacity, length), dtype=torch.long, device=device)  # free rows: no masks
        self.new = torch.zeros((capacity, length), dtype=torch.bool, device=device)  # each row's generated columns
        self.stopped = torch.zeros(capacity, dtype=torch.bool, device=device)  # rows that produced a stop token
        self.stops = torch.tensor(sorted(stop_ids), device=device)
        valid = torch.ones((capacity, length), dtype=torch.bool, device=device) if padded else None
        self.free = list(range(capacity))
        self.requests: list[BlockRows] = []
        self.column: int | None = None  # the block the next call decodes (set by the first request placed)
        self.planned: list[list[int]] | None = None  # per row, masks per block: the static paths' calls, planned
        if path in ("static", "graph") and denoiser.cfg.strategy == "low_confidence":
            self.planned = [[0] * (length // self.size) for _ in range(capacity)]
        self._held = ExitStack()
        self.keys: _BlockPath = self._held.enter_context(_block_logits(lm, path, capacity, length, valid))

    @property
    def busy(self) -> bool:
        return bool(self.requests)

    @torch.inference_mode()
    def place(self, prompt: list[int], count: int, region: int, pad: int,
              initial: Tensor | None = None) -> BlockRows:
        """Add a request's `count` rows before the first block runs: its prompt after `pad` columns (whole blocks,
        `block_layout`), masks after; `initial` ([count, region] ids, some masks): a draft, every block of it
        denoised."""
        size, mask = self.size, self.denoiser.mask_id
        column = pad + (len(prompt) // size) * size
        start, end = pad + len(prompt), pad + -(-(len(prompt) + region) // size) * size
        if count > len(self.free) or end > self.length or (pad and self.keys.valid is None) \
                or self.column not in (None, column):
            raise DiceError("the request does not fit the block batch")
        self.column = column
        host = torch.full((count, self.length), mask, dtype=torch.long)
        host[:, :pad] = 0  # padding: never attended, never denoised
        host[:, pad:start] = torch.tensor(prompt, dtype=torch.long)
        if initial is not None:
            host[:, start:start + initial.shape[1]] = initial.cpu()
        taken, self.free = self.free[:count], self.free[count:]
        device = self.x.device
        contiguous = taken == list(range(taken[0], taken[0] + count))
        rows: Rows = slice(taken[0], taken[0] + count) if contiguous else torch.tensor(taken, device=device)
        self.x[rows] = host.to(device)
        self.new[rows] = torch.arange(self.length, device=device)[None, :] >= start
        valid = self.keys.valid
        if valid is not None:
            valid[rows, :self.length] = torch.arange(self.length, device=device)[None, :] >= pad
        if self.planned is not None:
            counts = (host == mask).view(count, -1, size).sum(dim=2).tolist()
            for row, blocks in zip(taken, counts, strict=True):
                self.planned[row] = blocks
        request = BlockRows(rows, taken, start, end, region, initial is not None)
        self.requests.append(request)
        return request

    @torch.inference_mode()
    def run_block(self) -> list[BlockRows]:
        """Denoise the block at `column` in every row; the requests that are done."""
        if self.column is None or not self.requests:
            return []
        lo = self.column
        hi = lo + self.size
        calls = None if self.planned is None else planned_calls([row[lo // self.size] for row in self.planned],
                                                                self.denoiser.cfg.steps)
        self.denoiser.denoise(self.x, lo, hi, self.keys.logits_of(lo, hi), calls)
        self.column = hi
        fills = [request for request in self.requests if not request.draft]
        stopped: list[bool] = []
        if fills:
            hits = torch.isin(self.x[:, lo:hi], self.stops) & self.new[:, lo:hi]
            self.stopped |= hits.any(dim=1)
            stopped = self.stopped.tolist()  # one wait per block
        left = []
        for request in list(self.requests):
            if hi >= request.end or (not request.draft and all(stopped[row] for row in request.indices)):
                stop = request.start + request.region if request.draft else hi
                request.ids = self.x[request.rows, request.start:stop].clone()
                self.requests.remove(request)
                self.x[request.rows] = 0  # no masks left: its rows are not denoised on for the others
                if self.planned is not None:
                    for row in request.indices:
                        self.planned[row] = [0] * (self.length // self.size)
                left.append(request)
        return left

    def close(self) -> None:
        """Give back the static step's stepper (its cache and graph) to the next generation."""
        self._held.close()


@torch.inference_mode()
def generate_blocks_batch(lm: DiffusionLM, prompts: list[list[int]], candidates: list[int], regions: list[int],
                          denoiser: Denoiser, stop_ids: set[int], use_cache: bool = True,
                          initials: list[Tensor] | None = None, step: BlockStep = "auto") -> list[Tensor]:
    """`generate_blocks` for several prompts in one batch (a `BlockBatch` of exactly their rows): each prompt's
    generated ids ([candidates, n]).

    Rows are left-padded by whole blocks (`block_layout`) so that their first decoded blocks share a column;
    padding is never attended by real tokens (`valid_keys`), so a row sees what it sees alone, shifted by a
    multiple of the block size: rotary attention sees only position differences, so its tokens are its solo
    generation's up to the rounding of other absolute positions and of a padded call (fp32: the same tokens,
    tests/test_block_batch.py). Every denoising step is one model call for all rows: on a GPU, where a step
    of a large model costs the weights' read whatever the rows, k requests cost about what one does. A
    request is done at the first block where all its rows have produced a stop token (or at its region's
    end); the batch runs until every request is done, and each gets the columns up to its own end. With
    `initials` (drafts: per prompt its [candidates, region] ids, some of them masks, `regions` their widths)
    every block of every draft is denoised, as `generate_blocks` does one.
    """
    pads, ends = block_layout(prompts, regions, lm.config.block_size)
    path = _block_path(lm, step, denoiser.banned.device) if use_cache else "recompute"
    batch = BlockBatch(lm, denoiser, stop_ids, sum(candidates), max(ends), path, padded=any(pads))
    try:
        placed = [batch.place(prompt, count, region, pad, None if initials is None else initials[i])
                  for i, (prompt, count, region, pad) in enumerate(zip(prompts, candidates, regions, pads,
                                                                       strict=True))]
        while batch.busy:
            batch.run_block()
    finally:
        batch.close()
    return [request.ids for request in placed if request.ids is not None]


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
