"""The context keys of recent in-place fills, kept so that a re-masking round of the same hole starts at once.

A bidirectional fill with the context cache runs its first call over the whole sequence with the window
all masks, and keeps the context's keys and values (`sampling._ContextCache`); every later step runs the
window alone over them. A completion that re-masks a failing fill (`dice_lsp.complete.remask`) asks for the
same hole again with the fill as a draft (`Draft.over_fill`): the context and the canvas are the first
fill's, so its keys can serve the round too. They are kept here, keyed by what they were computed from (the
sequence with its window masked, the window's columns, the position of column 0), and the round runs window
steps only, the draft in the fill's canvas ending in pads as a short canvas does: one first call (~100 ms
of the embedded model on 2 CPU cores) saved per round. The round's context then does not see the draft
(the approximation the fill's own later steps make); after a half-typed line that cost fills on the dev
pool, so the pipeline asks for it only on lines where nothing was typed before the cursor.

Keys are kept per model (weakly: they go with it), the most recently used first, at most `KEPT` entries and
`KEPT_BYTES` in all, for the embedded transformer's in-place fills of one shared context (a request alone,
not rows padded into a batch). A solo fill and a `Stream` of the step scheduler both compute them with the
region at position 0 (`sampling.fill_in_place`); the round runs its window at the entry's origin.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from dataclasses import dataclass

from torch import Tensor

from dice_lsp.engine.transformer import KVCache

KEPT = 8  # entries per model
KEPT_BYTES = 256 << 20  # keys and values of all of a model's entries, at most


@dataclass(frozen=True)
class Context:
    """One row's context keys (the window dropped) and the position of column 0 they were computed at."""

    cache: KVCache
    origin: int

    @property
    def bytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (*self.cache.keys, *self.cache.values) if t is not None)

    def rows(self, count: int) -> KVCache:
        """A cache of `count` rows, each this context's (views: nothing is copied)."""
        if self.cache.stacked is not None:
            return KVCache.of_stacked(*(t.expand(-1, count, -1, -1, -1) for t in self.cache.stacked))
        out = KVCache(len(self.cache.keys))
        for layer, (k, v) in enumerate(zip(self.cache.keys, self.cache.values, strict=True)):
            assert k is not None and v is not None
            out.keys[layer], out.values[layer] = k.expand(count, -1, -1, -1), v.expand(count, -1, -1, -1)
        return out


Key = tuple[int, int, int, tuple[int, ...]]
_KEPT: weakref.WeakKeyDictionary[object, OrderedDict[Key, Context]] = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def _key(masked: Tensor, lo: int, hi: int, origin: int) -> Key:
    return lo, hi, origin, tuple(masked.tolist())


def keep(lm: object, masked: Tensor, lo: int, hi: int, cache: KVCache, row: int, origin: int) -> None:
    """Keep the context keys of row `row` of `cache` (keys of the whole sequence `masked` ([T] ids, window lo..hi
    masked) with the window's dropped, computed with column 0 at position `origin`), copied out of `cache`."""
    if cache.stacked is not None:
        one = KVCache.of_stacked(*(t[:, row:row + 1].clone() for t in cache.stacked))
    else:
        one = KVCache(len(cache.keys))
        for layer, (k, v) in enumerate(zip(cache.keys, cache.values, strict=True)):
            if k is None or v is None:
                return
            one.keys[layer], one.values[layer] = k[row:row + 1].clone(), v[row:row + 1].clone()
    entry, key = Context(one, origin), _key(masked, lo, hi, origin)
    with _LOCK:
        kept = _KEPT.setdefault(lm, OrderedDict())
        kept[key] = entry
        kept.move_to_end(key)
        while len(kept) > KEPT or (len(kept) > 1 and sum(e.bytes for e in kept.values()) > KEPT_BYTES):
            kept.popitem(last=False)


def find(lm: object, masked: Tensor, lo: int, hi: int, origin: int) -> Context | None:
    """The kept context of the sequence `masked` with window lo..hi computed at `origin`, if any (it becomes
    the most recent)."""
    key = _key(masked, lo, hi, origin)
    with _LOCK:
        kept = _KEPT.get(lm)
        entry = None if kept is None else kept.get(key)
        if entry is not None and kept is not None:
            kept.move_to_end(key)
        return entry


def forget(lm: object | None = None) -> None:
    """Drop the kept contexts of `lm` (None: of every model)."""
    with _LOCK:
        if lm is None:
            _KEPT.clear()
        else:
            _KEPT.pop(lm, None)
