"""Static-shape denoising steps for block-diffusion models, replayed as CUDA graphs.

A denoising step of the block [lo, hi) runs the window [lo - size, hi): the block before it (finished; its
keys and values reach the static cache with its final tokens on the way, as `_CachedBlocks` stores a
finished block with the next block's first call, at no extra model call) and the block itself. That input,
[rows, 2 * size] ids at positions lo - size..hi over a cache of fixed length, has the same shapes for
every step of every block, so on CUDA it is captured once per (rows, block size, cache length) as a
`torch.cuda.CUDAGraph` and replayed: a step is one graph launch instead of ~700 kernel launches from Python.
Two kinds of call run the same code uncaptured, at their own length: the first call of a generation (the
prompt's blocks and the first block to decode, positions 0..hi, filling the cache) and the calls of a
block at position 0 (it has no block before it).

The steppers live as long as their model (the most recently used, up to `KEPT_BYTES` of caches): the graph,
its static input/output tensors and its cache are reused by the next generation of the same shape; what
an earlier generation left in the cache lies beyond the new one's written positions and is masked. A batch of
several prompts (`sampling.generate_blocks_batch`, a team server's queued fills) runs in a stepper whose rows
are rounded up to a power of two, so batches of 5 to 8 fills share one graph; its spare rows compute on stale
ids and are never read. A `rowwise` stepper takes positions per row ([rows, 2 * size]): each row runs the
window of its own block (`rowwise.RowwiseBatch`, where fills join and leave at any step).
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import Tensor

from dice_lsp.engine.fused import LayerWeights
from dice_lsp.engine.transformer import StaticKVCache, Transformer
from dice_lsp.errors import DiceError

KEPT_BYTES = 4 << 30  # the steppers' caches kept per model, at most (the least recently used go first; one stays)
BUCKET = 256  # cache lengths are rounded up to a multiple of this, so nearby lengths share one graph
WARMUP = 2  # uncaptured runs on a side stream before the capture (PyTorch's recipe: lazy init, autotuning)


class BlockStepper:
    """The window step of one (rows, cache length), captured as a CUDA graph when `capture` is set."""

    def __init__(self, lm: Transformer, rows: int, max_len: int, capture: bool, padded: bool = False,
                 rowwise: bool = False) -> None:
        self.size = lm.config.block_size
        self.cache: StaticKVCache = lm.new_static_cache(rows, max_len)
        if padded:  # rows of several prompts (`generate_blocks_batch`): the mask hides their padding
            self.cache.padded()
        device = self.cache.keys.device
        self.ids = torch.zeros((rows, 2 * self.size), dtype=torch.long, device=device)
        self.positions = torch.arange(2 * self.size, device=device)  # [rows, 2 * size] where `rowwise`
        if rowwise:
            self.positions = self.positions.repeat(rows, 1)
        self.only = slice(self.size, 2 * self.size)
        self.graph: torch.cuda.CUDAGraph | None = None
        self.weights: list[LayerWeights] | None = None  # the fused weights a captured graph reads (`_capture`)
        self.logits: Tensor | None = None
        self.lock = threading.Lock()  # one generation at a time writes this cache
        if capture:
            self._capture(lm)

    def _capture(self, lm: Transformer) -> None:
        device = self.ids.device
        if device.type != "cuda":
            raise DiceError(f"CUDA-graph steps need the model on a CUDA device, it is on {device}")
        self.weights = lm.static_weights()  # fused on this stream; the graph reads them, they live as long as it
        side = torch.cuda.Stream(device)  # type: ignore[no-untyped-call]
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):
            for _ in range(WARMUP):
                lm.static_forward(self.ids, self.positions, self.cache, self.only)
        torch.cuda.current_stream(device).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, capture_error_mode="thread_local"):
            self.logits = lm.static_forward(self.ids, self.positions, self.cache, self.only)
        self.graph = graph

    @property
    def bytes(self) -> int:
        return self.cache.keys.nbytes + self.cache.values.nbytes

    def first(self, lm: Transformer, x: Tensor, hi: int, start: int = 0) -> Tensor:
        """Logits of the block ending at `hi`, running positions start..hi (uncaptured: its own length): a
        generation's first call (0..hi), or a call that also writes finished blocks no window step wrote."""
        positions = torch.arange(start, hi, device=x.device)
        ids, rows = x[:, start:hi], x.shape[0]
        if rows < self.cache.rows:  # spare rows (a rounded-up batch): any ids, never read
            ids = torch.cat((ids, ids.new_zeros((self.cache.rows - rows, hi - start))))
        return lm.static_forward(ids, positions, self.cache, slice(hi - start - self.size, hi - start))[:rows]

    def step(self, lm: Transformer, x: Tensor, lo: int) -> Tensor:
        """Logits of the block at `lo` (> 0), running the window lo - size..lo + size.

        Replayed: the returned tensor is the graph's output, overwritten by the next replay; the sampler
        reads it before then. Nothing here waits for the device.
        """
        rows = x.shape[0]
        self.ids[:rows].copy_(x[:, lo - self.size:lo + self.size])
        self.positions.copy_(torch.arange(lo - self.size, lo + self.size, device=x.device))
        if self.graph is None or self.logits is None:
            return lm.static_forward(self.ids, self.positions, self.cache, self.only)[:rows]
        self.graph.replay()
        return self.logits[:rows]

    def step_rows(self, lm: Transformer, ids: Tensor, positions: Tensor) -> Tensor:
        """Logits of each row's block (`rowwise` steppers): `ids` [rows, 2 * size] the windows of the rows' blocks
        before and their blocks, at `positions` (same shape, on the device). Replayed as `step` is."""
        self.ids.copy_(ids)
        self.positions.copy_(positions)
        if self.graph is None or self.logits is None:
            return lm.static_forward(self.ids, self.positions, self.cache, self.only)
        self.graph.replay()
        return self.logits


_STEPPERS: weakref.WeakKeyDictionary[Transformer, OrderedDict[tuple[int, int, bool, bool, bool], BlockStepper]] = (
    weakref.WeakKeyDictionary())
_STEPPERS_LOCK = threading.Lock()


def cache_length(lm: Transformer, total: int) -> int:
    """The static cache length for a generation of `total` positions: rounded up to a bucket, in the window."""
    size, window = lm.config.block_size, lm.config.max_position_embeddings
    bucket = size * -(-BUCKET // size)
    return min(-(-total // bucket) * bucket, window - window % size)


@contextmanager
def block_stepper(lm: Transformer, rows: int, total: int, capture: bool, padded: bool = False,
                  rowwise: bool = False) -> Iterator[BlockStepper]:
    """The stepper for `rows` rows of `total` positions (made, and captured, the first time), held for
    one generation; `padded`: rows of several prompts, whose padding its mask hides (rows rounded up to a power
    of two); `rowwise`: positions per row."""
    key = (1 << (rows - 1).bit_length() if padded else rows, cache_length(lm, total), capture, padded, rowwise)
    with _STEPPERS_LOCK:
        kept = _STEPPERS.setdefault(lm, OrderedDict())
        stepper = kept.get(key)
        if stepper is not None:
            kept.move_to_end(key)
    if stepper is None:
        stepper = BlockStepper(lm, key[0], key[1], capture, padded, rowwise)
        with _STEPPERS_LOCK:
            kept[key] = stepper
            while len(kept) > 1 and sum(s.bytes for s in kept.values()) > KEPT_BYTES:
                kept.popitem(last=False)
    with stepper.lock:
        yield stepper
