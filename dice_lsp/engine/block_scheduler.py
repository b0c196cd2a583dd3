"""Iteration-level scheduling of block-diffusion fills (SDAR/DICE checkpoints): fills join the running batch at
the next denoising step and leave at the step that finishes them.

`fill_batch` runs the block fills that were queued together; a fill that arrives one step later would wait for
the whole batch — for a 128-token region that is ~32 blocks of a few steps each. Here the batch is a
`rowwise.RowwiseBatch` that outlives its first requests: before every denoising call the model host admits the
queued block fills that fit (`fits`: free rows, an end within the batch's columns), each row
decoding its own block at its own positions, and a fill is answered at the call that finishes it. A fill's tokens
are its solo fill's (fp32, greedy: tests/test_block_scheduler.py). Fills and re-masking drafts of any sampler
setting share one batch (`KEY`): each row is committed by its request's sampler; sampled rows of one setting
draw from one generator, as in `fill_batch`.

The batch has a fixed number of rows and columns (the static step's cache and CUDA graph are made for that shape):
the first fills' rows or `capacity` (the model host: as many as its last block run held at once, up to
`JOIN_ROWS`), rounded up to a power of two, whichever is more; a spare row costs its two blocks of a call, nearly
free where a call reads the model's weights whatever its rows (a large model on a GPU). Its columns leave room
for one more region after the first fills'. A fill that does not fit waits, and no later fill passes it: the
batch drains and the next one starts with the waiting fills, shaped for them.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from dice_lsp.engine.fill_types import CancelCheck, FillRequest, FillResult, StepProgress
from dice_lsp.engine.infill import BlockPrompt, batch_key, block_prompt, block_result
from dice_lsp.engine.model import LoadedModel
from dice_lsp.engine.rowwise import RowRequest, RowwiseBatch, row_end
from dice_lsp.engine.transformer import Transformer
from dice_lsp.errors import Cancelled, DiceError

KEY = "block fills"  # the model host's queue key of every block fill and draft (`key`): one scheduler runs them all
JOIN_ROWS = 16  # rows a batch is made with, for fills to join (at most the host's rows); see the module's docstring


def supports(model: LoadedModel, request: FillRequest) -> bool:
    """Whether `request` can join a running block batch: a fill or draft of the native block transformer."""
    return isinstance(model.lm, Transformer) and model.attention == "block" and batch_key(model, request) is not None


def key(model: LoadedModel, request: FillRequest) -> object:
    """The queue key under which the model host groups `request` with others (`KEY` for block fills, whatever their
    sampler; else `batch_key`)."""
    return KEY if supports(model, request) else batch_key(model, request)


@dataclass(eq=False)
class BlockFill:
    """One request in a `BlockScheduler`; `result` or `error` once it has left."""

    request: FillRequest
    prompt: BlockPrompt
    cancel: CancelCheck | None
    rows: RowRequest | None = None  # where it sits, once placed in a batch
    result: FillResult | None = None
    error: BaseException | None = None


class BlockScheduler:
    """Block fills and drafts, denoised a call at a time; see the module's docstring.

    The interface is `continuous.FillScheduler`'s (`admit`, `step`, `busy`, `rows`, `calls`, `row_steps`), plus
    `fits`: whether a queued fill can join now (the model host leaves one that cannot at the head of its queue).
    `capture`: the step as a CUDA graph (None: on a CUDA device); elsewhere the static step runs uncaptured.
    """

    def __init__(self, model: LoadedModel, capacity: int = JOIN_ROWS, capture: bool | None = None) -> None:
        if not isinstance(model.lm, Transformer) or model.attention != "block":
            raise DiceError(f"{model.name}: only the native block-diffusion transformer joins fills between steps")
        if capture and model.device.type != "cuda":
            raise DiceError(f"CUDA-graph block steps need a CUDA device, the model is on {model.device}")
        self.model, self.lm, self.key, self.capacity = model, model.lm, KEY, capacity
        self.capture = model.device.type == "cuda" if capture is None else capture
        self.size = model.lm.config.block_size
        self.batch: RowwiseBatch | None = None
        self.waiting: list[BlockFill] = []  # admitted, not placed yet (in order: none passes another)
        self.fills: list[BlockFill] = []  # placed in the running batch
        self.calls = self.row_steps = 0  # model calls made, and the rows they carried (rows per call: the gain)
        self.peak_rows = 0  # the most rows placed and waiting at once
        self._prompts: dict[int, tuple[FillRequest, BlockPrompt]] = {}  # prepared by `fits`, by id(request)

    @property
    def rows(self) -> int:
        return sum(fill.request.candidates for fill in (*self.waiting, *self.fills))

    @property
    def busy(self) -> bool:
        """Whether a `step` has anything to do or to hand back."""
        return bool(self.waiting or self.fills)

    def _prepare(self, request: FillRequest) -> BlockPrompt:
        known = self._prompts.pop(id(request), None)
        if known is not None and known[0] is request:
            return known[1]
        return block_prompt(self.model, request)

    def fits(self, request: FillRequest) -> bool:
        """Whether `request` can join now (True also where it can never run: `admit` then says why)."""
        try:
            prompt = self._prepare(request)
        except DiceError:
            return True
        self._prompts[id(request)] = (request, prompt)
        if self.batch is None:
            return True  # it starts the next batch with those waiting, which is shaped for them all
        return not self.waiting and self.batch.fits(len(prompt.ids), request.candidates, prompt.region)

    def admit(self, request: FillRequest, cancel: CancelCheck | None = None,
              progress: StepProgress | None = None) -> BlockFill:
        """Add `request`: placed in the running batch, or waiting for room (the next batch where it never fits)."""
        if not supports(self.model, request):
            raise DiceError("only fills of the native block-diffusion transformer join its batch")
        prompt = self._prepare(request)
        if row_end(len(prompt.ids), prompt.region, self.size) > self.model.window - self.model.window % self.size:
            raise DiceError(f"prompt and region ({len(prompt.ids) + prompt.region} tokens) exceed the model window")
        fill = BlockFill(request, prompt, cancel)
        self.waiting.append(fill)
        self._place_waiting()
        self.peak_rows = max(self.peak_rows, self.rows)
        return fill

    def _place_waiting(self) -> None:
        """Place the waiting fills, in order, while they fit the running batch."""
        while self.batch is not None and self.waiting:
            fill = self.waiting[0]
            if not self.batch.fits(len(fill.prompt.ids), fill.request.candidates, fill.prompt.region):
                return
            self.waiting.pop(0)
            fill.rows = self.batch.place(fill.prompt.ids, fill.request.candidates, fill.prompt.region,
                                         fill.request.sampler, fill.prompt.initial, fill.cancel)
            self.fills.append(fill)

    def _start(self) -> None:
        """A batch for the waiting fills, with rows and columns for them all and spare ones for more to join."""
        prompts = [fill.prompt for fill in self.waiting]
        rows = sum(fill.request.candidates for fill in self.waiting)
        room = -(-max(p.region for p in prompts) // self.size) * self.size
        end = max(row_end(len(p.ids), p.region, self.size) for p in prompts)
        length = min(end + room, self.model.window - self.model.window % self.size)
        capacity = 1 << (max(rows, self.capacity) - 1).bit_length()
        self.batch = RowwiseBatch(self.lm, self.model.special, capacity, length, self.capture)

    @torch.inference_mode()
    def step(self) -> list[BlockFill]:
        """One denoising call of every placed fill (a batch started first if none runs); the fills that left."""
        left = []
        for fill in list(self.waiting):  # cancelled while waiting: never placed
            if fill.cancel is not None and fill.cancel():
                self.waiting.remove(fill)
                fill.error = Cancelled("cancelled before it joined a batch")
                left.append(fill)
        if self.batch is None and self.waiting:
            self._start()
        self._place_waiting()
        batch = self.batch
        if batch is None:
            return left
        calls, rows = batch.calls, batch.active_rows
        try:
            done = batch.step()
        except BaseException:
            self._close()
            raise
        self.calls += batch.calls - calls
        self.row_steps += (batch.calls - calls) * rows
        owners = {id(fill.rows): fill for fill in self.fills}
        for placed in done:
            fill = owners[id(placed)]
            self.fills.remove(fill)
            if placed.error is not None:
                fill.error = placed.error
            else:
                assert placed.ids is not None
                fill.result = block_result(self.model, fill.request, fill.prompt, placed.ids, placed.logp,
                                           placed.model_calls)
            left.append(fill)
        if not batch.busy:
            self._close()
        return left

    def _close(self) -> None:
        """The batch is done (or failed): its stepper goes back; fills still waiting start the next one."""
        if self.batch is not None:
            self.batch.close()
        self.batch, self.fills = None, []
