"""Block-diffusion fills join a running batch between blocks (`sampling.BlockBatch`, `engine.block_scheduler`): a
team server with an SDAR/DICE checkpoint answers a fill that arrives mid-batch after at most a block, not after
the whole batch. Each fill must get the tokens it gets alone — whether it started the batch, joined it later
(left-padded by more blocks, its prompt's keys computed by a call of its own) or took the rows of a fill that
left — on a tiny random SDAR checkpoint in fp32 on the CPU, through the dynamic cache and the static step."""

from __future__ import annotations

import threading
from concurrent.futures import Future
from pathlib import Path

import pytest
import torch

from dice_lsp.engine import Draft, FillRequest, FillResult, SamplerConfig, batch_key, fill, load_model
from dice_lsp.engine.block_scheduler import BlockScheduler
from dice_lsp.engine.model import LoadedModel
from dice_lsp.engine.sampling import BlockBatch, Denoiser, generate_blocks
from dice_lsp.errors import Cancelled
from dice_lsp.jobs.model_host import ModelHost, Ticket
from dice_lsp.settings import Settings

from .test_engine import PREFIX, SUFFIX
from .test_model_host import Hook

GREEDY = SamplerConfig(steps=4, temperature=0.0)
PATHS = ["dynamic", "static"]


@pytest.fixture(scope="module")
def sdar(sdar_dir: Path) -> LoadedModel:
    return load_model(sdar_dir, device="cpu", dtype="float32")


def _request(cut: int, tokens: int, candidates: int = 1) -> FillRequest:
    return FillRequest(PREFIX[:len(PREFIX) - cut], SUFFIX, max_tokens=tokens, candidates=candidates, sampler=GREEDY)


def _same(batched: FillResult | None, solo: FillResult) -> None:
    assert batched is not None
    assert batched.texts == solo.texts
    assert batched.scores == pytest.approx(solo.scores, abs=1e-5)
    assert batched.canvases == solo.canvases


@pytest.mark.parametrize("path", PATHS)
def test_fills_admitted_between_blocks_join_the_running_batch_with_their_solo_texts(sdar: LoadedModel,
                                                                                    path: str) -> None:
    first, *later = [_request(0, 24), _request(9, 12, 2), _request(30, 16), _request(3, 8)]
    scheduler = BlockScheduler(sdar, batch_key(sdar, first), capacity=8, step=path)  # type: ignore[arg-type]
    fills = [scheduler.admit(first)]
    left = scheduler.step()  # the batch starts with the first fill alone, and runs its first block
    batch = scheduler.batch
    assert batch is not None and not left
    for request in later:  # each joins after one more block, its first block at the batch's column then
        assert scheduler.fits(request)
        column = batch.column
        fills.append(scheduler.admit(request))
        placed = fills[-1].rows
        assert placed is not None and placed.pad % 4 == 0 and placed.pad + len(fills[-1].prompt.ids) // 4 * 4 == column
        left += scheduler.step()
        assert scheduler.batch is batch and batch.column == column + 4  # type: ignore[operator]
    while scheduler.busy:
        left += scheduler.step()
    assert {id(fill) for fill in left} == {id(fill) for fill in fills}
    for fill_, request in zip(fills, [first, *later], strict=True):
        _same(fill_.result, fill(sdar, request))


@pytest.mark.parametrize("path", PATHS)
def test_a_request_takes_the_rows_of_one_that_left_and_gets_its_solo_tokens(sdar: LoadedModel, path: str) -> None:
    """Rows freed by a request that stopped keep its keys in the cache; the next request's padding hides them."""
    ids = sdar.tokenizer.encode(PREFIX + "x" + SUFFIX * 3)
    probe = generate_blocks(sdar.lm, ids[:13], 1, 24, Denoiser(GREEDY, sdar.special, sdar.device), set())
    stops = {int(probe[0].mode().values)}  # a token the tiny model writes: the first request stops early
    prompts, regions = [ids[:13], ids[:9], ids[:6]], [24, 40, 12]
    alone = [generate_blocks(sdar.lm, prompt, 1, region, Denoiser(GREEDY, sdar.special, sdar.device), stops,
                             step=path)  # type: ignore[arg-type]
             for prompt, region in zip(prompts, regions, strict=True)]
    assert alone[0].shape[1] < alone[1].shape[1]  # the first stops before the second
    batch = BlockBatch(sdar.lm, Denoiser(GREEDY, sdar.special, sdar.device), stops, capacity=2, length=64,
                       path=path, padded=True, prefill=True)  # type: ignore[arg-type]
    placed = [batch.place(prompts[0], 1, regions[0]), batch.place(prompts[1], 1, regions[1], pad=4)]
    rows_of_first = placed[0].indices
    while placed[0].ids is None:
        assert not batch.fits(len(prompts[2]), 1, regions[2])  # both rows taken
        batch.run_block()
    assert batch.fits(len(prompts[2]), 1, regions[2])
    placed.append(batch.place(prompts[2], 1, regions[2]))
    assert placed[2].indices == rows_of_first and placed[2].pad > 0
    while batch.busy:
        batch.run_block()
    batch.close()
    for solo, request in zip(alone, placed, strict=True):
        assert request.ids is not None and torch.equal(request.ids, solo)


def test_a_fill_whose_prompt_passes_the_batch_column_waits_for_the_next_batch(sdar: LoadedModel) -> None:
    short, long = _request(len(PREFIX) - 20, 8), FillRequest(PREFIX * 3, SUFFIX, max_tokens=8, sampler=GREEDY)
    scheduler = BlockScheduler(sdar, batch_key(sdar, short), capacity=4)
    scheduler.admit(short)
    left = scheduler.step()
    assert not scheduler.fits(long)  # its first block lies past the batch's column: it cannot be placed there
    while scheduler.busy:
        left += scheduler.step()
    assert scheduler.batch is None and scheduler.fits(long)
    waited = scheduler.admit(long)
    while scheduler.busy:
        scheduler.step()
    _same(waited.result, fill(sdar, long))
    _same(left[0].result, fill(sdar, short))


def test_a_cancelled_fill_leaves_at_the_next_block_and_the_others_keep_their_tokens(sdar: LoadedModel) -> None:
    requests = [_request(0, 16), _request(9, 16, 2), _request(5, 12)]
    scheduler = BlockScheduler(sdar, batch_key(sdar, requests[0]), capacity=4)
    victim = Ticket()
    fills = [scheduler.admit(request, cancel) for request, cancel in zip(requests, [None, victim, None],
                                                                          strict=True)]
    scheduler.step()
    victim.cancel()
    left = scheduler.step()
    assert [fill_.error for fill_ in left if fill_ is fills[1]] and isinstance(fills[1].error, Cancelled)
    while scheduler.busy:
        scheduler.step()
    _same(fills[0].result, fill(sdar, requests[0]))
    _same(fills[2].result, fill(sdar, requests[2]))


def test_drafts_join_a_running_batch_of_drafts_with_their_solo_texts(sdar: LoadedModel) -> None:
    drafts = [FillRequest(PREFIX[:len(PREFIX) - k], SUFFIX, max_tokens=12, sampler=GREEDY, candidates=c,
                          draft=Draft(text, noise=noise, spans=spans))
              for k, c, text, noise, spans in [(0, 1, "threadIdx.x + blockIdx.x * 4;", 0.0, ((0, 9),)),
                                               (9, 2, "blockIdx.x * 4", 0.5, ()), (17, 1, "n", 0.0, ((0, 1),))]]
    scheduler = BlockScheduler(sdar, batch_key(sdar, drafts[0]), capacity=4)
    fills = [scheduler.admit(drafts[0])]
    scheduler.step()
    fills += [scheduler.admit(draft) for draft in drafts[1:]]
    while scheduler.busy:
        scheduler.step()
    for fill_, draft in zip(fills, drafts, strict=True):
        _same(fill_.result, fill(sdar, draft))


def test_the_model_host_lets_a_block_fill_queued_mid_batch_join_it(sdar_dir: Path, sdar: LoadedModel) -> None:
    """A lone editor's fills run in batches of their own rows; once the server has seen several fills at once, its
    next batches keep spare rows, and a fill queued while one runs joins it (fewer calls than the two one after the
    other; calls carrying both fills' rows) with its solo texts."""
    first, late = _request(0, 24), _request(9, 12, 2)
    alone = [fill(sdar, first), fill(sdar, late)]
    host = ModelHost(lambda status: None, max_batch_rows=8)
    host.load(Settings(model=str(sdar_dir), device="cpu", dtype="float32")).result()
    try:
        gate = threading.Event()
        host.submit(lambda model: gate.wait(30))  # three fills queue behind it and start as one batch
        busy = [host.fill(_request(cut, 8), Ticket()) for cut in (3, 5, 7)]
        gate.set()
        assert all(future.result().texts for future in busy)
        joined: list[Future[FillResult]] = []

        def at(check: int) -> None:
            if check == 2:  # the first fill's second block is next: the late one is queued now and joins for its third
                joined.append(host.fill(late, Ticket()))

        before = (host.fills, host.fill_batches, host.fill_steps, host.step_rows)
        started = host.fill(first, Hook(at))
        _same(started.result(), alone[0])
        _same(joined[0].result(), alone[1])
        fills, batches, steps, rows = (a - b for a, b in zip(
            (host.fills, host.fill_batches, host.fill_steps, host.step_rows), before, strict=True))
        assert (fills, batches) == (2, 1)
        assert steps < alone[0].model_calls + alone[1].model_calls  # it ran beside the first, not after it
        assert rows > steps  # some calls carried both fills' rows
    finally:
        assert host.close(30)


@pytest.mark.parametrize("extend", [False, True])
def test_a_fill_that_would_outlast_the_running_batch_joins_only_where_asked(sdar: LoadedModel, extend: bool) -> None:
    """By default a fill joins only where it ends within the running batch's span (joiners never make a batch run
    longer: a longer fill waits and starts the next batch with the others waiting); `extend` lets it join anyway."""
    short, longer, shorter = _request(0, 8), _request(9, 24), _request(5, 4)
    scheduler = BlockScheduler(sdar, batch_key(sdar, short), capacity=4, extend=extend)
    first = scheduler.admit(short)
    scheduler.step()
    assert scheduler.fits(shorter)  # ends within the batch's span
    assert scheduler.fits(longer) is extend
    waited = scheduler.admit(longer) if extend else None
    while scheduler.busy:
        scheduler.step()
    _same(first.result, fill(sdar, short))
    if waited is not None:
        _same(waited.result, fill(sdar, longer))


def test_fills_admitted_together_beyond_the_free_rows_wait_for_rows_instead_of_failing(sdar: LoadedModel) -> None:
    """The host asks `fits` of each queued fill, then admits them together: each fits the free rows alone, not both
    (a 16-editor load on the team server found it); the second waits and joins when rows are free."""
    first, second, third = _request(0, 24), _request(9, 12), _request(5, 8)
    scheduler = BlockScheduler(sdar, batch_key(sdar, first), capacity=2)
    fills = [scheduler.admit(first)]
    scheduler.step()
    assert scheduler.fits(second) and scheduler.fits(third)  # one free row: each alone fits
    fills += [scheduler.admit(second), scheduler.admit(third)]
    assert [fill_.rows is not None for fill_ in fills] == [True, True, False]  # the third waits for a row
    while scheduler.busy:
        scheduler.step()
    for fill_, request in zip(fills, [first, second, third], strict=True):
        _same(fill_.result, fill(sdar, request))


def test_a_fill_cancelled_while_it_waits_leaves_without_being_placed(sdar: LoadedModel) -> None:
    """An editor that types on cancels its completion: a fill waiting for the running batch to drain leaves at the
    next block, never placed (no prompt call, no rows), and the batch's fill keeps its tokens."""
    short, longer = _request(0, 8), _request(9, 24)
    scheduler = BlockScheduler(sdar, batch_key(sdar, short), capacity=4)
    first = scheduler.admit(short)
    scheduler.step()
    ticket = Ticket()
    waiting = scheduler.admit(longer, ticket)  # outlasts the batch: it waits
    assert waiting.rows is None and waiting in scheduler.waiting
    ticket.cancel()
    left = scheduler.step()
    assert waiting in left and isinstance(waiting.error, Cancelled) and waiting.rows is None
    while scheduler.busy:
        scheduler.step()
    _same(first.result, fill(sdar, short))
