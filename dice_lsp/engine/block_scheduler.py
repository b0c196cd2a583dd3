"""Iteration-level scheduling of block-diffusion fills (SDAR/DICE checkpoints): fills join a running batch
between blocks and leave when done.

`fill_batch` runs the block fills that were queued together (`sampling.generate_blocks_batch`); a fill that
arrives one step later would wait for the whole batch — for a 128-token region that is ~32 blocks. Here the
batch is a `sampling.BlockBatch` that outlives its first requests: after every block (a few denoising steps)
the model host admits the queued fills of the same `batch_key` that fit (`fits`), each placed with its first
decoded block at the batch's current column (left-padded by whole blocks; the prompts' earlier blocks computed
by one call for the fills placed at that boundary), and a fill is answered at the block that finishes it. So a
fill that joins waits at most one block, not a batch.

A joining fill's tokens are its solo fill's up to float rounding (its padding is never attended, rotary
attention sees only position differences, its prompt's keys come from a call apart): the same tokens in
fp32 with greedy decoding (tests/test_block_scheduler.py); sampled rows draw from the batch's one generator,
as in `fill_batch`. The batch has a fixed number of rows and columns (the static step's cache and CUDA graph
are made for that shape): the first fills' rows or `capacity` (the model host: as many as its last block run
held at once, up to `JOIN_ROWS`), rounded up to a power of two; a spare row costs its 2 blocks of a step, never a
prompt (the prompts of the fills placed at one boundary are computed by one call of their own, `BlockBatch`'s
prefill), nearly free where a step reads the model's weights whatever its rows (a large model on a GPU). Its
columns leave room for one more region after the first fills'. By default a fill joins only where it ends within
the running batch's span (`extend`: wherever it fits): a batch decodes every row's block at one column, so each
block runs until its slowest row is done, and joiners that outlast the batch kept it alive with ever more rows
at different phases (on an H100 up to 2x slower than whole batches; docs/PERFORMANCE.md).
A fill that does not fit (no free rows, a prompt longer than the current column, an end past the last
column) waits for the batch to drain; the next batch starts afresh at column zero.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from dice_lsp.engine.block_graph import cache_length
from dice_lsp.engine.fill_types import CancelCheck, FillRequest, FillResult, StepProgress
from dice_lsp.engine.infill import BlockPrompt, batch_key, block_prompt, block_result
from dice_lsp.engine.model import LoadedModel
from dice_lsp.engine.sampling import BlockBatch, BlockRows, BlockStep, Denoiser, _block_path, block_layout
from dice_lsp.engine.transformer import Transformer
from dice_lsp.errors import Cancelled, DiceError

JOIN_ROWS = 16  # rows a batch is made with, for fills to join (at most the host's rows); see the module's docstring


def supports(model: LoadedModel, request: FillRequest) -> bool:
    """Whether `request` can join a running block batch: a fill or draft of the native block transformer."""
    return isinstance(model.lm, Transformer) and model.attention == "block" and batch_key(model, request) is not None


@dataclass(eq=False)
class BlockFill:
    """One request in a `BlockScheduler`; `result` or `error` once it has left."""

    request: FillRequest
    prompt: BlockPrompt
    cancel: CancelCheck | None
    rows: BlockRows | None = None  # where it sits, once placed in a batch
    result: FillResult | None = None
    error: BaseException | None = None


class BlockScheduler:
    """Block fills of one `batch_key`, denoised a block at a time; see the module's docstring.

    The interface is `continuous.FillScheduler`'s (`admit`, `step`, `busy`, `rows`, `calls`, `row_steps`), plus
    `fits`: whether a queued fill can join now (the model host leaves one that cannot at the head of its queue).
    """

    def __init__(self, model: LoadedModel, key: object, capacity: int = JOIN_ROWS, step: BlockStep = "auto",
                 extend: bool = False) -> None:
        if not isinstance(model.lm, Transformer) or model.attention != "block":
            raise DiceError(f"{model.name}: only the native block-diffusion transformer joins fills between blocks")
        self.model, self.lm, self.key, self.capacity = model, model.lm, key, capacity
        self.path = _block_path(model.lm, step, model.device)  # the static step and its graph on CUDA
        self.extend = extend  # whether a fill may join when it would end after every fill of the running batch
        self.size = model.lm.config.block_size
        self.batch: BlockBatch | None = None
        self.waiting: list[BlockFill] = []  # admitted before a batch runs: laid out together when it starts
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

    def _waiting_rows(self) -> int:
        return sum(fill.request.candidates for fill in self.waiting)

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
        if self.batch is not None:
            return self.batch.fits(len(prompt.ids), request.candidates + self._waiting_rows(), prompt.region,
                                   within=not self.extend)
        if not self.waiting:
            return True
        return self._length([*(fill.prompt for fill in self.waiting), prompt]) <= self.model.window

    def admit(self, request: FillRequest, cancel: CancelCheck | None = None,
              progress: StepProgress | None = None) -> BlockFill:
        """Add `request`: placed in the running batch at its current column, or laid out with the others
        admitted before the next batch starts."""
        if batch_key(self.model, request) != self.key:
            raise DiceError("only fills of the scheduler's batch key join its batch")
        prompt = self._prepare(request)
        fill = BlockFill(request, prompt, cancel)
        if self._length([prompt]) > self.model.window:
            raise DiceError(f"prompt and region ({self._length([prompt])} tokens) exceed the model window")
        if self.batch is not None and self._joins(fill):
            self._place(fill)
        else:  # the next batch's, or this one's where it fits later (fills admitted together share its free rows)
            self.waiting.append(fill)
        self.peak_rows = max(self.peak_rows, self.rows)
        return fill

    def _joins(self, fill: BlockFill) -> bool:
        assert self.batch is not None
        return self.batch.fits(len(fill.prompt.ids), fill.request.candidates, fill.prompt.region,
                               within=not self.extend)

    def _length(self, prompts: list[BlockPrompt]) -> int:
        """Columns of a batch that starts with `prompts`: their padded layout and room for one more region."""
        _, ends = block_layout([p.ids for p in prompts], [p.region for p in prompts], self.size)
        room = -(-max(p.region for p in prompts) // self.size) * self.size
        return min(cache_length(self.lm, max(ends) + room), self.model.window - self.model.window % self.size)

    def _start(self) -> None:
        """A batch for the waiting fills that fit the window together (the first always does: `admit`), laid out
        together (`block_layout`), with rows for more to join; the rest wait to join it."""
        count = len(self.waiting)
        while count > 1 and self._length([fill.prompt for fill in self.waiting[:count]]) > self.model.window:
            count -= 1
        starting, self.waiting = self.waiting[:count], self.waiting[count:]
        prompts = [fill.prompt for fill in starting]
        pads, ends = block_layout([p.ids for p in prompts], [p.region for p in prompts], self.size)
        rows = sum(fill.request.candidates for fill in starting)
        capacity = 1 << (max(rows, self.capacity) - 1).bit_length()
        length = max(self._length(prompts), max(ends))
        denoiser = Denoiser(starting[0].request.sampler, self.model.special, self.model.device)
        self.batch = BlockBatch(self.lm, denoiser, self.model.special.stop_ids, capacity, length, self.path,
                                padded=True, prefill=True)
        for fill, pad in zip(starting, pads, strict=True):
            self._place(fill, pad)

    def _place(self, fill: BlockFill, pad: int | None = None) -> None:
        assert self.batch is not None
        fill.rows = self.batch.place(fill.prompt.ids, fill.request.candidates, fill.prompt.region, pad,
                                     fill.prompt.initial, fill.cancel)
        self.fills.append(fill)

    @torch.inference_mode()
    def step(self) -> list[BlockFill]:
        """One block of every placed fill (a batch started first if none runs); the fills that left."""
        if self.batch is None and self.waiting:
            self._start()
        batch = self.batch
        if batch is None:
            return []
        left = []
        for fill in list(self.waiting):  # fills that did not fit when admitted: join where they fit now
            if fill.cancel is not None and fill.cancel():  # cancelled while waiting: never placed
                self.waiting.remove(fill)
                fill.error = Cancelled("cancelled before it joined a batch")
                left.append(fill)
            elif self._joins(fill):
                self.waiting.remove(fill)
                self._place(fill)
        calls, rows = batch.denoiser.model_calls, sum(fill.request.candidates for fill in self.fills)
        try:
            done = batch.run_block()
        except BaseException:
            self._close()
            raise
        self.calls += batch.denoiser.model_calls - calls
        self.row_steps += (batch.denoiser.model_calls - calls) * rows
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
