"""Iteration-level scheduling of in-place fills: a fill joins a running batch between denoising steps.

`fill_batch` runs requests that arrived together; a request arriving one step later waits for the whole
batch. Here each request is a `Stream` (its rows, in the layout a solo `fill` gives them; its own
`Denoiser`: settings, generator, step count, cancellation; its own context keys), and `FillScheduler.step`
runs one model call for every stream whose window has the same shape, commits each stream's tokens
through its own denoiser, and lets finished streams leave. Streams are admitted between steps (the
caller decides when, and how many rows fit), as LLM servers do for autoregressive decoding.

One scheduler takes every in-place fill of the embedded transformer (`KEY`, the model host's queue key for
them all), whatever its region size and sampler: a step runs one call per group of streams that can share it —
the same sampler, the same window shape (its offset in the region and its width: they differ with the region's
size, and with `block_length` between streams at different blocks) and the same kind of call: a stream's first
step in a window computes its context (the whole sequence, as a solo fill's first call does: the "prefill");
with the context cache, later steps run the window alone over those cached keys. So a step runs one call for
the streams that prefill (left-padded to one length, as `fill_batch` pads) and one for the streams in their
window, keys padded to one length and masked, per sampler and window shape. Fills of another shape or sampler
thus run beside the batch, a call each per step, instead of waiting for it to drain (a head-of-line wait that
made the batching team server 12% slower than an unbatched one at 8 editors on an H200).

Positions: a call has one start position, but streams' regions start at different columns (their
prefixes differ). Rotary attention sees only position differences, so every stream is placed with its
region at position 0 (its prefix at negative positions): the windows of all streams then share the start
position of their offset, whatever their prefixes. A solo fill places its region at 0 too (`fill_in_place`),
so a lone stream is its solo fill exactly, in any dtype (the editor's fills are lone streams); streams that
share a step differ from their solo fills only by the rounding of padded calls, and sample the same tokens
with greedy and seeded sampling in fp32 (each stream samples from its own generator, with the shape its solo
fill has). Only the embedded transformer takes a start position below zero; other models batch whole
(`supports`), except block-diffusion checkpoints, whose fills join at the next step too (`block_scheduler`:
each row at its own block and positions).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from dice_lsp.engine.fill_types import CancelCheck, FillRequest, FillResult, StepProgress
from dice_lsp.engine.infill import (
    batch_key,
    in_place_context,
    in_place_result,
    in_place_rows,
    region_of,
)
from dice_lsp.engine.model import LoadedModel
from dice_lsp.engine.sampler_config import SamplerConfig
from dice_lsp.engine.sampling import Denoiser, _ContextCache
from dice_lsp.engine.transformer import KVCache, Transformer
from dice_lsp.engine.window_graph import window_logits
from dice_lsp.errors import Cancelled, DiceError


def _commit_greedy(group: list[Stream], width: int, logits: Tensor) -> None:
    """One denoising step of every stream of `group` from their joined `logits`, sampled and chosen as one batch:
    what `Denoiser.commit` does per stream (every operation there is per row, and greedy sampling draws nothing
    from the streams' generators), in a few dozen operations for the whole group instead of per stream (on a
    GPU each is a launch from Python: the step's cost once its model call is a replayed graph)."""
    first = group[0].denoiser
    windows = torch.cat([stream.x[:, stream.start:stream.start + width] for stream in group])
    masked = windows == first.mask_id
    steps = torch.tensor([[stream.step] for stream in group for _ in range(stream.rows)], dtype=torch.long,
                         pin_memory=windows.is_cuda).to(windows.device, non_blocking=True)
    tokens, confidence = first.sample(logits)
    chosen = first.choose(tokens, confidence, masked, first.cfg.steps - steps, first.cfg.min_steps - steps)
    committed = torch.where(chosen, tokens, windows)
    row = 0
    for stream in group:
        rows, lo = slice(row, row + stream.rows), stream.start
        stream.denoiser.count_call()
        stream.x[:, lo:lo + width] = committed[rows]
        stream.denoiser.record(stream.x, lo, lo + width, chosen[rows], confidence[rows])
        stream.step += 1
        row += stream.rows


KEY = "in-place fills"  # the model host's queue key of every fill a `FillScheduler` takes (`supports`)


def supports(model: LoadedModel, request: FillRequest) -> bool:
    """Whether `request` can be a stream: a batchable in-place fill of the embedded transformer."""
    return isinstance(model.lm, Transformer) and model.attention == "bidirectional" and \
        batch_key(model, request) is not None


@dataclass(eq=False)
class Stream:
    """One request's rows and where their denoising stands; `result` or `error` once it has left."""

    request: FillRequest
    x: Tensor  # [rows, T]: prefix, region (canvases as masks then pads), suffix; no padding
    lo: int  # the region's first column
    region: int
    overlap: str  # the healed prefix tail that opens the fill
    denoiser: Denoiser
    start: int  # the current window's first column
    step: int = 0  # steps done in the current window
    cache: KVCache | None = None  # the current window's context keys (with the context cache)
    result: FillResult | None = None
    error: BaseException | None = None

    @property
    def rows(self) -> int:
        return int(self.x.shape[0])

    @property
    def width(self) -> int:
        """The current window's width (the region, or a block of it)."""
        block = self.denoiser.cfg.block_length or self.region
        return min(block, self.lo + self.region - self.start)

    @property
    def shape(self) -> tuple[int, int]:
        """The window's offset in the region and its width (streams of one call share them)."""
        return self.start - self.lo, self.width


Group = tuple[bool, SamplerConfig, int, int]  # what the streams of one call share: a first step?, sampler, shape


class FillScheduler:
    """In-place fills of the embedded transformer, denoised a step at a time; see the module's docstring."""

    def __init__(self, model: LoadedModel) -> None:
        if not isinstance(model.lm, Transformer) or model.attention != "bidirectional":
            raise DiceError(f"{model.name}: only the embedded (bidirectional) transformer fills step by step")
        self.model, self.lm, self.key = model, model.lm, KEY  # key: the model host's queue key of its fills
        self.streams: list[Stream] = []
        self.calls = self.row_steps = 0  # model calls made, and the rows they carried (rows per call: the gain)
        self._left: list[Stream] = []  # streams that left outside a step (nothing to denoise)
        self._joined: dict[Group, tuple[tuple[KVCache, ...], KVCache, Tensor | None]] = {}

    @property
    def rows(self) -> int:
        return sum(stream.rows for stream in self.streams)

    @property
    def busy(self) -> bool:
        """Whether a `step` has anything to do or to hand back."""
        return bool(self.streams or self._left)

    def fits(self, request: FillRequest) -> bool:
        """Whether `request` can join now: always (streams need no shared layout; the host counts the rows)."""
        return True

    def admit(self, request: FillRequest, cancel: CancelCheck | None = None,
              progress: StepProgress | None = None) -> Stream:
        """Add `request` as a stream; it takes its first step with the next `step`."""
        if not supports(self.model, request):
            raise DiceError("only in-place fills join a fill scheduler (a draft or another model's fill runs alone)")
        region = region_of(self.model, request)
        prefix, suffix, overlap = in_place_context(self.model, request, region)
        rows, _ = in_place_rows(self.model, request, region, prefix, suffix, 0, len(prefix) + region + len(suffix))
        x = torch.tensor(rows, dtype=torch.long, device=self.model.device)
        denoiser = Denoiser(request.sampler, self.model.special, self.model.device, cancel, progress)
        stream = Stream(request, x, len(prefix), region, overlap, denoiser, start=len(prefix))
        if self._advance(stream):
            self._left.append(stream)
        else:
            self.streams.append(stream)
        return stream

    def drop(self, stream: Stream) -> None:
        """Take `stream` out now (its rows are not run again)."""
        if stream in self.streams:
            self.streams.remove(stream)

    @torch.inference_mode()
    def step(self) -> list[Stream]:
        """One denoising step of every stream; the streams that left (done, or cancelled before it)."""
        left, self._left = self._left, []
        for stream in list(self.streams):
            if stream.denoiser.cancel is not None and stream.denoiser.cancel():
                stream.error = Cancelled(f"cancelled after {stream.denoiser.model_calls} model calls")
                self.streams.remove(stream)
                left.append(stream)
        groups: dict[Group, list[Stream]] = {}
        for stream in self.streams:
            fresh = stream.cache is None  # its window's first step (every step without the context cache)
            groups.setdefault((fresh, stream.denoiser.cfg, *stream.shape), []).append(stream)
        self._joined = {key: joined for key, joined in self._joined.items() if key in groups}  # none of a past group
        for key, group in groups.items():
            fresh, _, offset, width = key
            if not fresh:
                logits = self._window_call(group, key)
            elif group[0].denoiser.cfg.context_cache:
                logits = self._prefill(group, offset, width)
            else:
                logits = self._full_call(group, offset, width)
            self.calls += 1
            self.row_steps += logits.shape[0]
            if len(group) > 1 and group[0].denoiser.cfg.temperature == 0.0:
                _commit_greedy(group, width, logits)
                continue
            row = 0
            for stream in group:
                here = logits[row:row + stream.rows]
                stream.denoiser.commit(stream.x, stream.start, stream.start + width, here, stream.step)
                stream.step += 1
                row += stream.rows
        masked = self._masked(self.streams)
        for stream, any_masked in zip(list(self.streams), masked, strict=True):
            if self._advance(stream, any_masked):
                self.streams.remove(stream)
                left.append(stream)
        return left

    @staticmethod
    def _masked(streams: list[Stream]) -> list[bool]:
        """Whether each stream's current window still holds masks, read from the device at once (one wait
        for the GPU per step, not one per stream)."""
        if not streams:
            return []
        found = [(s.x[:, s.start:s.start + s.width] == s.denoiser.mask_id).any() for s in streams]
        return [bool(value) for value in torch.stack(found).tolist()]

    def _advance(self, stream: Stream, masked: bool | None = None) -> bool:
        """Move `stream` past windows with nothing left to do (no masks, or its steps spent), as a solo fill
        does; True once the whole region is done (its `result` then set). `masked`: whether the current
        window holds masks, when the caller has read it already."""
        cfg, end = stream.denoiser.cfg, stream.lo + stream.region
        while stream.start < end:
            stop = stream.start + stream.width
            if masked is None:
                masked = bool((stream.x[:, stream.start:stop] == stream.denoiser.mask_id).any())
            if stream.step < cfg.steps and masked:
                return False
            stream.start, stream.step, stream.cache, masked = stop, 0, None, None
        logp = stream.denoiser.logp
        stream.result = in_place_result(self.model, stream.request, stream.x[:, stream.lo:end],
                                        None if logp is None else logp[:, stream.lo:end], stream.overlap,
                                        stream.denoiser.model_calls)
        return True

    def _padded(self, group: list[Stream]) -> tuple[Tensor, Tensor | None, int]:
        """The group's rows left-padded so that their regions share a column; which tokens are real (None:
        all); that column."""
        lo = max(stream.lo for stream in group)
        total = lo + max(stream.x.shape[1] - stream.lo for stream in group)
        pad = self.model.special.pad_id
        x = torch.full((sum(s.rows for s in group), total), pad, dtype=torch.long, device=self.model.device)
        valid = torch.zeros(x.shape, dtype=torch.bool, device=x.device)
        row = 0
        for stream in group:
            before = lo - stream.lo
            x[row:row + stream.rows, before:before + stream.x.shape[1]] = stream.x
            valid[row:row + stream.rows, before:before + stream.x.shape[1]] = True
            row += stream.rows
        same = all(stream.lo == lo and stream.x.shape[1] == total for stream in group)
        return x, None if same else valid, lo

    def _full_call(self, group: list[Stream], offset: int, width: int) -> Tensor:
        """Without the context cache: the whole sequence, every step (region at position 0)."""
        x, valid, lo = self._padded(group)
        logits: Tensor = self.lm(x, -lo, only=slice(lo + offset, lo + offset + width), valid_keys=valid)
        return logits

    def _prefill(self, group: list[Stream], offset: int, width: int) -> Tensor:
        """A window's first step: the whole sequence once (window masked, as `_ContextCache` computes it);
        each stream keeps its own rows' context keys, without padding."""
        x, valid, lo = self._padded(group)
        context = _ContextCache(self.lm, valid, self.model.special.mask_id, origin=-lo)
        logits = context.logits(lo + offset, lo + offset + width, x)
        cache = context.cache
        assert isinstance(cache, KVCache)
        row = 0
        for stream in group:
            first, keys = lo - stream.lo, stream.x.shape[1] - width
            if cache.stacked is not None:  # views of the static first call's keys
                stream.cache = KVCache.of_stacked(
                    *(t[:, row:row + stream.rows, :, first:first + keys] for t in cache.stacked))
                row += stream.rows
                continue
            own = self.lm.new_cache()
            for layer, (k, v) in enumerate(zip(cache.keys, cache.values, strict=True)):
                assert k is not None and v is not None
                own.keys[layer] = k[row:row + stream.rows, :, first:first + keys]
                own.values[layer] = v[row:row + stream.rows, :, first:first + keys]
            stream.cache = own
            row += stream.rows
        return logits

    def _window_call(self, group: list[Stream], key: Group) -> Tensor:
        """A later step with the context cache: the windows alone, over each stream's context keys."""
        _, _, offset, width = key
        ids = torch.cat([stream.x[:, stream.start:stream.start + width] for stream in group])
        cache, valid = self._join(group, key)
        return window_logits(self.lm, ids, offset, cache, valid)

    def _join(self, group: list[Stream], key: Group) -> tuple[KVCache, Tensor | None]:
        """The group's context keys as one cache, padded to one length (and which keys are real); built
        again only when the group's streams or their windows change."""
        width = key[3]
        members = tuple(stream.cache for stream in group if stream.cache is not None)
        known = self._joined.get(key)
        if known is not None and len(known[0]) == len(members) and all(
                a is b for a, b in zip(known[0], members, strict=True)):
            return known[1], known[2]
        lengths = [cache.length for cache in members]
        longest = max(lengths)

        def padded(parts: list[Tensor | None]) -> Tensor:
            return torch.cat([F.pad(part, (0, 0, 0, longest - part.shape[2])) for part in parts if part is not None])

        stacks = [cache.stacked for cache in members]
        if all(stack is not None for stack in stacks):  # two operations per stream, not two per layer
            joined = KVCache.of_stacked(*(torch.cat([F.pad(stack[i], (0, 0, 0, longest - stack[i].shape[3]))
                                                     for stack in stacks if stack is not None], dim=1)
                                          for i in (0, 1)))
        else:
            joined = self.lm.new_cache()
            for layer in range(len(joined.keys)):
                joined.keys[layer] = padded([cache.keys[layer] for cache in members])
                joined.values[layer] = padded([cache.values[layer] for cache in members])
        valid = None
        if min(lengths) < longest:  # keys: the context padded to `longest`, then the window
            rows = []
            for stream, length in zip(group, lengths, strict=True):
                real = torch.ones(longest + width, dtype=torch.bool, device=self.model.device)
                real[length:longest] = False
                rows.append(real.expand(stream.rows, -1))
            valid = torch.cat(rows)
        self._joined[key] = (members, joined, valid)
        return joined, valid
