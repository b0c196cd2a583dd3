"""Block-diffusion requests in one batch whose rows each decode their own block: a request joins at the next
denoising step and leaves at the step that finishes it (iteration-level scheduling for SDAR/DICE checkpoints).

`sampling.BlockBatch` decodes one column for all its rows, so a block runs until its slowest row is done and a
request can join only at a block boundary, placed (left-padded) at the batch's column. Here every row has its
own current block: one denoising call runs, for every row, the window of the block before its block and the
block itself (`block_graph.BlockStepper` made `rowwise`: [rows, 2 * size] ids at each row's own positions, keys
written at each row's own columns of the static cache, each row's block-causal mask its own), then commits
each row's block by its own step count and its own request's sampler (`Denoiser.commit_rows`, one denoiser per
sampler setting: fills and re-masking drafts of any sampler share a batch). A row whose block has no masks left moves to
its next block with masks; a row that produced a stop token in a finished block, or passed its region's end, is
finished; a request leaves when all its rows are. So rows are independent sequences at their own positions,
as they are alone: in fp32 a request's tokens are its solo `generate_blocks`'s (greedy; sampled rows draw from
one generator per sampler setting), whatever it shares the batch with and whenever it joins.

Keys a row's window does not write come from a call apart, one per step for every row that needs it (`_prefill`):
a joining request's prompt before its first block (computed once, copied into each of its rows), and a draft
row's finished blocks that it skipped (blocks without masks need no call, so their keys, and the block's before
them, would be missing). Every column of a row is written before the row attends to it: the window writes its
two blocks before attending, later blocks are hidden by the block-causal mask until then; whatever a row's
earlier occupant or a joiner's right-padded prompt call left there is never read. Prompts shorter than a block
are left-padded by one block (the window needs a block before the first), the padding hidden by the mask.

A batch has a fixed number of rows and columns (the static step's cache and CUDA graph are made for that shape);
a request fits if rows are free and it ends within the columns. Free rows compute on zeros and are never read.
"""

from __future__ import annotations

import math
from contextlib import ExitStack
from dataclasses import dataclass

import torch
from torch import Tensor

from dice_lsp.engine.block_graph import block_stepper, cache_length
from dice_lsp.engine.fill_types import CancelCheck
from dice_lsp.engine.sampler_config import SamplerConfig
from dice_lsp.engine.sampling import Denoiser
from dice_lsp.engine.tokenizer import SpecialTokens
from dice_lsp.engine.transformer import Transformer
from dice_lsp.errors import Cancelled, DiceError


def row_end(prompt: int, region: int, size: int) -> int:
    """The column after a request's last block in a `RowwiseBatch`: its padding, prompt and region in whole blocks."""
    pad = size if prompt < size else 0
    return pad + -(-(prompt + region) // size) * size


@dataclass(eq=False)
class RowRequest:
    """One request's rows in a `RowwiseBatch`, and its generated ids once it is done."""

    rows: list[int]
    sampler: SamplerConfig
    pad: int  # columns of padding before its prompt (a block where the prompt is shorter than one, else none)
    start: int  # its first generated column
    end: int  # its prompt and region, rounded up to whole blocks
    region: int
    draft: bool  # a draft: every block with masks denoised, no stop
    joined_at: int  # the batch's model calls when it joined
    cancel: CancelCheck | None = None
    ids: Tensor | None = None  # [candidates, n] once done: its columns start..where its rows finished
    logp: Tensor | None = None  # their log-probabilities (NaN: not sampled)
    model_calls: int = 0  # the model calls it took part in
    error: BaseException | None = None  # set instead when it left cancelled


@dataclass
class _Row:
    """A taken row's progress (host side: read once per step, with the flags of `RowwiseBatch.step`)."""

    request: RowRequest
    blocks: list[int]  # the columns of its blocks with masks still to denoise, the current one first
    calls: int = 0  # calls its current block has had
    stop: int | None = None  # the column after its last finished block, once the row is finished


class RowwiseBatch:
    """Block-diffusion requests whose rows each decode their own block; see the module's docstring."""

    def __init__(self, lm: Transformer, special: SpecialTokens, capacity: int, length: int, capture: bool,
                 stop_ids: set[int] | None = None) -> None:
        if lm.config.attention != "block":
            raise DiceError("only block-diffusion models decode a block per row")
        self.lm, self.special, self.size = lm, special, lm.config.block_size
        self.length = cache_length(lm, length)
        if length > self.length:
            raise DiceError(f"prompt and region ({length} tokens) exceed the model window")
        self._held = ExitStack()
        self.stepper = self._held.enter_context(block_stepper(lm, capacity, self.length, capture, padded=True,
                                                              rowwise=True))
        self.capacity = self.stepper.cache.rows
        device = self.stepper.cache.keys.device
        self.x = torch.zeros((self.capacity, self.length), dtype=torch.long, device=device)  # free rows: no masks
        self.new = torch.zeros((self.capacity, self.length), dtype=torch.bool, device=device)  # generated columns
        self.logp = torch.full((self.capacity, self.length), math.nan, device=device)  # committed tokens' scores
        self.stops = torch.tensor(sorted(special.stop_ids if stop_ids is None else stop_ids), device=device)
        self.denoisers: dict[SamplerConfig, Denoiser] = {}  # one per sampler setting of the requests placed
        self.calls = 0  # model calls made
        valid = self.stepper.cache.valid
        assert valid is not None
        self.valid: Tensor = valid.fill_(True)
        self.offsets = torch.arange(2 * self.size, device=device) - self.size  # a window around a block's column
        self.every = torch.arange(self.capacity, device=device)
        # each row's block column and calls, sent once per step (pinned on CUDA: the copy does not wait for the device)
        self.host = torch.zeros((2, self.capacity), dtype=torch.long, pin_memory=device.type == "cuda")
        self.rows: dict[int, _Row] = {}
        self.free = list(range(self.capacity))
        self.requests: list[RowRequest] = []
        self._joining: list[tuple[RowRequest, list[int], Tensor]] = []  # whose rows, which, the ids before their window

    @property
    def busy(self) -> bool:
        return bool(self.requests)

    @property
    def active_rows(self) -> int:
        """Rows with a block still to denoise (those a call works for)."""
        return sum(state.stop is None for state in self.rows.values())

    def fits(self, prompt: int, rows: int, region: int) -> bool:
        """Whether a request of `prompt` tokens, `rows` rows and `region` new tokens can join now."""
        return rows <= len(self.free) and row_end(prompt, region, self.size) <= self.length

    @torch.inference_mode()
    def place(self, prompt: list[int], count: int, region: int, sampler: SamplerConfig,
              initial: Tensor | None = None, cancel: CancelCheck | None = None) -> RowRequest:
        """Add a request's `count` rows, denoised as `sampler` says; they join at the next step. `initial`
        ([count, region] ids, some masks): a draft, every block of it with masks denoised."""
        if not self.fits(len(prompt), count, region):
            raise DiceError("the request does not fit the running block batch")
        if sampler not in self.denoisers:
            self.denoisers[sampler] = Denoiser(sampler, self.special, self.x.device)
        size, mask = self.size, self.special.mask_id
        pad = size if len(prompt) < size else 0
        start, end = pad + len(prompt), row_end(len(prompt), region, size)
        host = torch.zeros((count, self.length), dtype=torch.long)  # after its end: zeros, never denoised
        host[:, pad:start] = torch.tensor(prompt, dtype=torch.long)
        host[:, start:end] = mask
        if initial is not None:
            host[:, start:start + initial.shape[1]] = initial.cpu()
        taken, self.free = self.free[:count], self.free[count:]
        device = self.x.device
        index = torch.tensor(taken, device=device)
        self.x[index] = host.to(device)
        columns = torch.arange(self.length, device=device)[None, :]
        self.new[index] = columns >= start
        self.valid[index] = columns >= pad
        self.logp[index] = math.nan
        request = RowRequest(taken, sampler, pad, start, end, region, initial is not None, self.calls, cancel)
        self.requests.append(request)
        first = (start // size) * size
        masked = (host[:, first:end] == mask).view(count, -1, size).any(dim=2).tolist()
        for row, blocks in zip(taken, masked, strict=True):
            self.rows[row] = _Row(request, [first + i * size for i, has in enumerate(blocks) if has])
        # the columns before each row's first window: its prompt's (one call for all its rows), or a draft row's
        # own up to its first block with masks
        firsts = [self.rows[row].blocks[0] if self.rows[row].blocks else end for row in taken]
        if all(column == first for column in firsts):
            if first > size:
                self._joining.append((request, taken, host[0, :first - size].to(device)))
        else:
            for i, (row, column) in enumerate(zip(taken, firsts, strict=True)):
                if column > size and self.rows[row].blocks:
                    self._joining.append((request, [row], host[i, :column - size].to(device)))
        for row in taken:
            if not self.rows[row].blocks:  # a draft row without masks: nothing to denoise
                self.rows[row].stop = end
        return request

    def _prefill(self) -> None:
        """Keys of the columns before each waiting row's window, in one uncaptured call for all of them: each
        entry's ids once (right-padded to the longest; padding on the left hidden), copied into its rows."""
        joining = [entry for entry in self._joining if entry[0] in self.requests]  # not cancelled meanwhile
        self._joining = []
        if not joining:
            return
        device = self.x.device
        upto = max(ids.shape[0] for _, _, ids in joining)
        stacked = torch.zeros((len(joining), upto), dtype=torch.long, device=device)
        for i, (_, _, ids) in enumerate(joining):
            stacked[i, :ids.shape[0]] = ids
        own = self.lm.new_static_cache(len(joining), upto)
        own.padded()
        assert own.valid is not None
        pads = torch.tensor([request.pad for request, _, _ in joining], device=device)
        own.valid.copy_(torch.arange(upto, device=device)[None, :] >= pads[:, None])
        self.lm.static_forward(stacked, torch.arange(upto, device=device), own, slice(upto - 1, upto))
        rows = torch.tensor([row for _, rows, _ in joining for row in rows], device=device)
        owners = torch.tensor([i for i, (_, rows, _) in enumerate(joining) for _ in rows], device=device)
        cache = self.stepper.cache
        cache.keys[:, rows, :, :upto] = own.keys[:, owners]
        cache.values[:, rows, :, :upto] = own.values[:, owners]

    @torch.inference_mode()
    def step(self) -> list[RowRequest]:
        """One denoising call for every row; the requests that left (done, or cancelled before it)."""
        left = [request for request in self.requests if request.cancel is not None and request.cancel()]
        for request in left:
            request.error = Cancelled(f"cancelled after {self.calls - request.joined_at} model calls")
            self._release(request)
        left += self._finished()
        if not self.requests:
            return left
        self._prefill()
        size, device = self.size, self.x.device
        at = [size] * self.capacity  # free rows: any column (they hold no masks)
        calls = [0] * self.capacity
        groups: dict[SamplerConfig, list[int]] = {}  # the rows with a block to denoise, by their sampler setting
        for row, state in self.rows.items():  # finished rows: their last block (no masks: nothing changes)
            if state.stop is None:
                at[row], calls[row] = state.blocks[0], state.calls
                groups.setdefault(state.request.sampler, []).append(row)
            else:
                at[row] = state.stop - size
        self.host.copy_(torch.tensor([at, calls]))  # the last step's copy is done: its flags were read
        column, steps = self.host.to(device, non_blocking=True).unbind(0)
        window = column[:, None] + self.offsets
        logits = self.stepper.step_rows(self.lm, self.x.gather(1, window), window)
        block = window[:, size:]
        self.calls += 1
        if len(groups) == 1:  # one sampler setting: every row (free and finished rows have no masks to commit)
            self.denoisers[next(iter(groups))].commit_rows(self.x, self.every, block, logits, steps[:, None], self.logp)
        else:
            for sampler, rows in groups.items():  # each sampler setting's rows committed its way
                index = torch.tensor(rows, device=device)
                self.denoisers[sampler].commit_rows(self.x, index, block[index], logits[index], steps[index, None],
                                                    self.logp)
        tokens = self.x.gather(1, block)
        done = ~(tokens == self.special.mask_id).any(dim=1)
        hit = (torch.isin(tokens, self.stops) & self.new.gather(1, block)).any(dim=1)
        flags = torch.stack((done, hit)).tolist()  # the one wait per step
        for row, state in self.rows.items():
            if state.stop is not None:
                continue
            state.calls += 1
            if not flags[0][row]:
                continue
            finished, state.calls = state.blocks.pop(0), 0
            if (stopped := flags[1][row] and not state.request.draft) or not state.blocks:
                state.stop = finished + size if stopped else state.request.end
            elif state.blocks[0] > finished + size:  # skipped blocks without masks: their keys first
                self._joining.append((state.request, [row], self.x[row, :state.blocks[0] - size]))
        return left + self._finished()

    def _finished(self) -> list[RowRequest]:
        """The requests all of whose rows are finished: their ids taken, their rows freed."""
        done = [request for request in self.requests if all(self.rows[row].stop is not None for row in request.rows)]
        for request in done:
            stops = [self.rows[row].stop or request.end for row in request.rows]  # all set
            stop = request.start + request.region if request.draft else max(stops)
            index = torch.tensor(request.rows, device=self.x.device)
            ids = self.x[index, request.start:stop].clone()  # its rows are reused
            scores = self.logp[index, request.start:stop].clone()
            for i, row_stop in enumerate(stops):  # a row finished before the others: past its stop token
                if row_stop < stop and not request.draft:
                    ids[i, row_stop - request.start:] = self.stops[0]
                    scores[i, row_stop - request.start:] = math.nan
            request.ids, request.logp = ids, scores
            self._release(request)
        return done

    def _release(self, request: RowRequest) -> None:
        """The request leaves: its rows hold no masks (nothing to denoise) and are free for another."""
        request.model_calls = self.calls - request.joined_at
        self.requests.remove(request)
        self.x[torch.tensor(request.rows, device=self.x.device)] = 0
        for row in request.rows:
            del self.rows[row]
        self.free += request.rows

    def close(self) -> None:
        """Give back the static step's stepper (its cache and graph) to the next generation."""
        self._held.close()
