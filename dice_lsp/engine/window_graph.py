"""Static-shape window steps of in-place (bidirectional) fills, replayed as CUDA graphs.

With the context cache (`SamplerConfig.context_cache`) a fill's first call in a window runs the whole
sequence and keeps the context's keys and values; every later step runs the window's tokens alone over
them. Those later calls have the same shapes for the whole window — [rows, width] ids over the same
context — so on CUDA they are captured once per (rows, width, context length rounded up to `BUCKET`) as a
`torch.cuda.CUDAGraph` and replayed: a step of the embedded model is one graph launch instead of ~300
kernel launches from Python (on an H200 host the eager step took ~9 ms of CPU for ~1 ms of GPU work).

The step runs `Transformer.static_forward` (fused weights, `fused.py`) over a `WindowKeys` buffer: the
context's keys (copied in once per window, `WindowStepper.load`), padding up to the bucket (masked), then
the window's own keys, written by each step. Rows are rounded up to a power of two (the team server's
batches change size as fills join and leave): the extra rows see only their own window and are dropped.
Masked keys weigh exactly 0, so the padding changes nothing but float rounding; in fp32 the tokens are
those of the dynamic path (test), in bf16 the fused kernels round differently (as the block models' static
step does).

A window's first call (the whole sequence, the window all masks) is static too (`FirstCall`, `first_call`):
the sequence is the "window" of a `WindowKeys` of context 0, padded to a multiple of `BUCKET` and masked, the
window's logits picked by an index tensor, so one graph per (rows, length bucket, window width) serves every
offset; the context's keys come out stacked (`KVCache.stacked`), so the later steps load them in two copies.
Counted per held-out fill (8 calls, `bench/fill_ops.py`), the eager first call was ~430 of the fill's ~814
operations launched from Python; with it captured, ~376 are left (mostly the commits).

The steppers live as long as their model (the most recently used, up to `KEPT_BYTES` of buffers). A shape
is captured on its `CAPTURE_AT`-th use (counted for the model's lifetime): a rare shape (an odd canvas or
context length) runs the same step uncaptured instead of paying a capture (~3 steps' time).
`PATH` picks the path: `auto` is the captured step on CUDA and the dynamic cache elsewhere (on a CPU the
fused step saves no time and would change the CPU's tokens); tests set `static` to run it on a CPU.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from typing import Literal

import torch
from torch import Tensor

from dice_lsp.engine.model import DiffusionLM
from dice_lsp.engine.transformer import KVCache, Transformer

KEPT_BYTES = 2 << 30  # the steppers' key/value buffers kept per model, at most (the least recently used go first)
BUCKET = 128  # context lengths are rounded up to a multiple of this, so nearby lengths share one graph
CAPTURE_AT = 4  # a shape is captured on its fourth use; before, it runs the same step uncaptured
WARMUP = 2  # uncaptured runs on a side stream before the capture (PyTorch's recipe)
WindowPath = Literal["auto", "dynamic", "static", "graph"]
PATH: WindowPath = "auto"


class WindowKeys:
    """Keys and values of one window step at fixed addresses: [layers, rows, kv heads, context + width, head dim]:
    the context (padded to `context`), then the window's keys, which each call writes (`extend`)."""

    def __init__(self, lm: Transformer, rows: int, context: int, width: int) -> None:
        cfg = lm.config
        weight = lm.model.embed_tokens.weight
        shape = (cfg.num_hidden_layers, rows, cfg.num_key_value_heads, context + width, cfg.head_dim)
        self.keys = torch.zeros(shape, device=weight.device, dtype=weight.dtype)
        self.values = torch.zeros(shape, device=weight.device, dtype=weight.dtype)
        self.allowed = torch.ones((rows, 1, 1, context + width), dtype=torch.bool, device=weight.device)
        self.rows, self.context, self.width = rows, context, width
        self.positions = torch.zeros(0, dtype=torch.long, device=weight.device)  # set by `static_forward`

    def extend(self, layer: int, k: Tensor, v: Tensor, keep: int) -> tuple[Tensor, Tensor]:
        """Write the window's `k`/`v` ([rows, heads, width, dim]) after the context; attend over all of it."""
        self.keys[layer, :, :, self.context:].copy_(k)
        self.values[layer, :, :, self.context:].copy_(v)
        return self.keys[layer], self.values[layer]

    def mask(self) -> Tensor:
        """[rows, 1, 1, keys] bool: the keys each row's queries may see (its real context, its window)."""
        return self.allowed


class _Captured:
    """A static call over fixed buffers, captured as a CUDA graph on first `replay` (`_forward` says what it runs)."""

    keys: WindowKeys

    def __init__(self) -> None:
        self.graph: torch.cuda.CUDAGraph | None = None
        self.logits: Tensor | None = None
        self.lock = threading.Lock()

    @property
    def bytes(self) -> int:
        return 2 * self.keys.keys.numel() * self.keys.keys.element_size()

    def _forward(self) -> Tensor:
        raise NotImplementedError

    def _call(self, rows: int, capture: bool) -> Tensor:
        """The first `rows` rows' logits; `capture`: replayed as a CUDA graph (captured now if it is not yet)."""
        if capture and self.graph is None:
            self._capture()
        if capture and self.graph is not None and self.logits is not None:
            self.graph.replay()
            return self.logits[:rows].clone()  # the graph's output is overwritten by the next replay
        return self._forward()[:rows]

    def _capture(self) -> None:
        device = self.keys.keys.device
        side = torch.cuda.Stream(device)  # type: ignore[no-untyped-call]
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):
            for _ in range(WARMUP):
                self._forward()
        torch.cuda.current_stream(device).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, capture_error_mode="thread_local"):
            self.logits = self._forward()
        self.graph = graph


class WindowStepper(_Captured):
    """The window step of one (rows, width, context bucket), captured as a CUDA graph once `capture` says so."""

    def __init__(self, lm: Transformer, rows: int, width: int, context: int) -> None:
        super().__init__()
        self.lm = lm
        self.keys = WindowKeys(lm, rows, context, width)
        device = self.keys.keys.device
        self.ids = torch.zeros((rows, width), dtype=torch.long, device=device)
        self.positions = torch.zeros(width, dtype=torch.long, device=device)
        self.span = torch.arange(width, device=device)
        self.loaded: tuple[KVCache, Tensor | None, Tensor | None] | None = None  # what `load` copied in

    def load(self, cache: KVCache, valid: Tensor | None) -> None:
        """Copy `cache`'s context keys in, and which keys each row may see (`valid`: [rows, context + width],
        cached keys first); nothing when they are the ones loaded last (the window's later steps). Rows past
        the cache's see their own window alone."""
        marker = (cache, valid, cache.keys[0])
        if self.loaded is not None and all(a is b for a, b in zip(marker, self.loaded, strict=True)):
            return
        length, context = cache.length, self.keys.context
        if cache.stacked is not None:  # two copies, not two per layer
            rows = cache.stacked[0].shape[1]
            self.keys.keys[:, :rows, :, :length].copy_(cache.stacked[0])
            self.keys.values[:, :rows, :, :length].copy_(cache.stacked[1])
        for layer, (k, v) in enumerate(zip(cache.keys, cache.values, strict=True)):
            if cache.stacked is not None:
                break
            assert k is not None and v is not None
            rows = k.shape[0]
            self.keys.keys[layer, :rows, :, :length].copy_(k)
            self.keys.values[layer, :rows, :, :length].copy_(v)
        allowed = self.keys.allowed.view(self.keys.rows, -1)
        allowed.fill_(True)
        allowed[:, length:context] = False  # padding up to the bucket
        allowed[rows:, :context] = False  # rows that only round the batch up
        if valid is not None:
            allowed[:rows, :length] = valid[:, :length]
            allowed[:rows, context:] = valid[:, length:]
        self.loaded = marker

    def run(self, ids: Tensor, start: int, capture: bool) -> Tensor:
        """Logits of the window `ids` ([rows, width], rows up to the stepper's) placed at positions
        start..start + width; `capture`: replayed as a CUDA graph (captured now if it is not yet)."""
        self.ids[:ids.shape[0]].copy_(ids)
        torch.add(self.span, start, out=self.positions)
        return self._call(ids.shape[0], capture)

    def _forward(self) -> Tensor:
        return self.lm.static_forward(self.ids, self.positions, self.keys, slice(None))


class FirstCall(_Captured):
    """A window's first call for one (rows, sequence length bucket, window width): the whole sequence over no
    context (a `WindowKeys` of context 0 whose "window" is the sequence, padded to the bucket and masked), the
    logits of the window's columns (picked by an index tensor, so one graph serves every window offset)."""

    def __init__(self, lm: Transformer, rows: int, length: int, width: int) -> None:
        super().__init__()
        self.lm = lm
        self.keys = WindowKeys(lm, rows, 0, length)
        device = self.keys.keys.device
        self.ids = torch.zeros((rows, length), dtype=torch.long, device=device)
        self.positions = torch.zeros(length, dtype=torch.long, device=device)
        self.span = torch.arange(length, device=device)
        self.only = torch.zeros(width, dtype=torch.long, device=device)
        self.window = torch.arange(width, device=device)

    def run(self, ids: Tensor, origin: int, lo: int, valid: Tensor | None, capture: bool) -> tuple[Tensor, KVCache]:
        """Logits of columns lo..lo + width of `ids` ([rows, T]: column 0 at position `origin`; `valid`: which
        tokens are real) and the keys of the context (the window's columns dropped) as a stacked cache."""
        rows, length = ids.shape
        self.ids[:rows, :length].copy_(ids)  # columns past `length` keep old tokens: masked below
        torch.add(self.span, origin, out=self.positions)
        torch.add(self.window, lo, out=self.only)
        allowed = self.keys.allowed.view(self.keys.rows, -1)
        allowed.fill_(True)
        allowed[:, length:] = False
        if valid is not None:
            allowed[:rows, :length] = valid
        logits = self._call(rows, capture)
        hi = lo + self.only.shape[0]
        columns = torch.cat((self.span[:lo], self.span[hi:length]))
        return logits, KVCache.of_stacked(self.keys.keys[:, :rows].index_select(3, columns),
                                          self.keys.values[:, :rows].index_select(3, columns))

    def _forward(self) -> Tensor:
        return self.lm.static_forward(self.ids, self.positions, self.keys, self.only)


StepKey = tuple[str, int, int, int]  # ("window", rows, width, context) or ("first", rows, length, width)
_STEPPERS: weakref.WeakKeyDictionary[Transformer, OrderedDict[StepKey, _Captured]] = weakref.WeakKeyDictionary()
_USES: weakref.WeakKeyDictionary[Transformer, dict[StepKey, int]] = weakref.WeakKeyDictionary()
_FUSABLE: weakref.WeakKeyDictionary[Transformer, bool] = weakref.WeakKeyDictionary()  # not int8: static steps
_STEPPERS_LOCK = threading.Lock()


def window_path(lm: object, device: torch.device) -> WindowPath:
    """The path window steps take on `device` (`PATH`; `auto`: captured on CUDA, dynamic elsewhere); the
    static paths serve the embedded transformer with fusable (not int8) weights only."""
    path = ("graph" if device.type == "cuda" else "dynamic") if PATH == "auto" else PATH
    if path == "graph" and device.type != "cuda":
        path = "static"
    if path == "dynamic" or not isinstance(lm, Transformer) or lm.config.attention != "bidirectional":
        return "dynamic"
    fusable = _FUSABLE.get(lm)
    if fusable is None:  # looked up once per model: a window step is on the hot path
        fusable = _FUSABLE[lm] = lm.static_weights() is not None
    return path if fusable else "dynamic"


def _bucket(length: int) -> int:
    return -(-length // BUCKET) * BUCKET


def _stepper(lm: Transformer, key: StepKey, path: WindowPath) -> tuple[_Captured, bool]:
    """The kept stepper of `key` (made now if new; the least recently used go past `KEPT_BYTES`), and whether
    this call replays it as a graph (from its `CAPTURE_AT`-th use on)."""
    with _STEPPERS_LOCK:
        kept = _STEPPERS.setdefault(lm, OrderedDict())
        uses = _USES.setdefault(lm, {})
        uses[key] = uses.get(key, 0) + 1
        stepper = kept.get(key)
        if stepper is None:
            kind, rows, a, b = key
            stepper = kept[key] = WindowStepper(lm, rows, a, b) if kind == "window" else FirstCall(lm, rows, a, b)
            while len(kept) > 1 and sum(s.bytes for s in kept.values()) > KEPT_BYTES:
                kept.popitem(last=False)
        kept.move_to_end(key)
        return stepper, path == "graph" and uses[key] >= CAPTURE_AT


def window_logits(lm: DiffusionLM, ids: Tensor, start: int, cache: KVCache, valid: Tensor | None) -> Tensor:
    """Logits of the window `ids` ([rows, width]) at positions start.., over `cache`'s context keys (`valid`:
    which keys are real, context first, as `Transformer.forward` takes them): the static step where
    `window_path` says so, else `Transformer.forward` with the cache."""
    path = window_path(lm, ids.device)
    if path == "dynamic" or not isinstance(lm, Transformer):
        return lm(ids, start, cache, valid_keys=valid)
    rows, width = ids.shape
    stepper, capture = _stepper(lm, ("window", 1 << (rows - 1).bit_length(), width, _bucket(cache.length)), path)
    assert isinstance(stepper, WindowStepper)
    with stepper.lock:
        stepper.load(cache, valid)
        return stepper.run(ids, start, capture)


def first_call(lm: DiffusionLM, ids: Tensor, origin: int, lo: int, hi: int,
               valid: Tensor | None) -> tuple[Tensor, KVCache] | None:
    """A window's first call as a static call where `window_path` says so: the logits of columns lo..hi of `ids`
    ([rows, T], column 0 at position `origin`; `valid`: its real tokens) and the context's keys (the window's
    columns dropped); None where the caller runs it dynamic (`Transformer.forward`, then `KVCache.drop`)."""
    path = window_path(lm, ids.device)
    if path == "dynamic" or not isinstance(lm, Transformer):
        return None
    rows, length = ids.shape
    stepper, capture = _stepper(lm, ("first", 1 << (rows - 1).bit_length(), _bucket(length), hi - lo), path)
    assert isinstance(stepper, FirstCall)
    with stepper.lock:
        return stepper.run(ids, origin, lo, valid, capture)
