"""Block-diffusion fills join a running batch at the next denoising step (`rowwise.RowwiseBatch`,
`engine.block_scheduler`): a team server with an SDAR/DICE checkpoint answers a fill that arrives mid-batch
without waiting for the batch. Each row decodes its own block at its own positions, so each fill must get the
tokens it gets alone — whether it started the batch, joined it later (its prompt's keys computed by a call of
its own), took the rows of a fill that left, or skipped a draft's blocks without masks — on a tiny random SDAR
checkpoint in fp32 on the CPU (the static step uncaptured; its CUDA-graph replay: tests/test_engine_gpu.py)."""

from __future__ import annotations

import threading
from concurrent.futures import Future
from pathlib import Path

import pytest
import torch

from dice_lsp.engine import Draft, FillRequest, FillResult, SamplerConfig, block_graph, fill, load_model
from dice_lsp.engine.block_scheduler import BlockScheduler
from dice_lsp.engine.model import LoadedModel
from dice_lsp.engine.rowwise import RowwiseBatch
from dice_lsp.engine.sampling import Denoiser, generate_blocks
from dice_lsp.engine.transformer import Transformer
from dice_lsp.errors import Cancelled
from dice_lsp.jobs.model_host import ModelHost, Ticket
from dice_lsp.settings import Settings

from .test_engine import PREFIX, SUFFIX
from .test_model_host import Hook

GREEDY = SamplerConfig(steps=4, temperature=0.0)
SAMPLERS = [GREEDY, SamplerConfig(strategy="threshold", threshold=0.2, steps=4, temperature=0.0),
            SamplerConfig(strategy="entropy", steps=4, temperature=0.0)]


@pytest.fixture(scope="module")
def sdar(sdar_dir: Path) -> LoadedModel:
    return load_model(sdar_dir, device="cpu", dtype="float32")


def _request(cut: int, tokens: int, candidates: int = 1, sampler: SamplerConfig = GREEDY) -> FillRequest:
    return FillRequest(PREFIX[:len(PREFIX) - cut], SUFFIX, max_tokens=tokens, candidates=candidates, sampler=sampler)


def _same(batched: FillResult | None, solo: FillResult) -> None:
    assert batched is not None
    assert batched.texts == solo.texts
    assert batched.scores == pytest.approx(solo.scores, abs=1e-5)
    assert batched.canvases == solo.canvases


def _lm(model: LoadedModel) -> Transformer:
    assert isinstance(model.lm, Transformer)
    return model.lm


@pytest.mark.parametrize("sampler", SAMPLERS, ids=["low-confidence", "threshold", "entropy"])
def test_fills_admitted_between_steps_join_at_the_next_step_with_their_solo_texts(sdar: LoadedModel,
                                                                                   sampler: SamplerConfig) -> None:
    """Rows at different blocks in one call, each committed by its own step count (the adaptive samplers spend
    a different number of calls on each row's block)."""
    first, *later = [_request(0, 24, sampler=sampler), _request(9, 12, 2, sampler), _request(30, 16, sampler=sampler),
                     _request(3, 8, sampler=sampler)]
    scheduler = BlockScheduler(sdar, capacity=8)
    fills = [scheduler.admit(first)]
    left = scheduler.step()  # the batch starts with the first fill alone
    assert scheduler.batch is not None and not left
    for request in later:  # each is placed at once and takes part in the very next call
        assert scheduler.fits(request)
        fills.append(scheduler.admit(request))
        assert fills[-1].rows is not None
        calls = scheduler.calls
        left += scheduler.step()
        assert scheduler.calls == calls + 1
    assert scheduler.row_steps > scheduler.calls  # calls carried several fills' rows
    while scheduler.busy:
        left += scheduler.step()
    assert {id(fill_) for fill_ in left} == {id(fill_) for fill_ in fills}
    for fill_, request in zip(fills, [first, *later], strict=True):
        _same(fill_.result, fill(sdar, request))


def test_requests_take_rows_that_others_left_and_get_their_solo_tokens(sdar: LoadedModel) -> None:
    """Rows freed by a request that stopped keep its keys in the cache; a request placed there writes every column
    it attends to before it reads it. Prompts shorter than a block (padded), of one block and of several; stops."""
    ids = sdar.tokenizer.encode(PREFIX + "x" + SUFFIX * 3)
    probe = generate_blocks(sdar.lm, ids[:13], 1, 24, Denoiser(GREEDY, sdar.special, sdar.device), set())
    stops = {int(probe[0].mode().values)}  # a token the tiny model writes: some requests stop early
    specs = [(ids[:13], 1, 24), (ids[:9], 2, 40), (ids[:3], 1, 12), (ids[:4], 1, 10), (ids[:30], 2, 16),
             (ids[:21], 1, 20)]
    alone = [generate_blocks(sdar.lm, prompt, count, region, Denoiser(GREEDY, sdar.special, sdar.device), stops,
                             step="dynamic") for prompt, count, region in specs]
    batch = RowwiseBatch(_lm(sdar), sdar.special, capacity=4, length=96, capture=False, stop_ids=stops)
    placed, queue, reused = {}, list(range(len(specs))), False
    try:
        while queue or batch.busy:
            while queue and batch.fits(len(specs[queue[0]][0]), specs[queue[0]][1], specs[queue[0]][2]):
                i = queue.pop(0)
                free = set(batch.free)
                placed[i] = batch.place(*specs[i], GREEDY)
                reused |= bool(set(placed[i].rows) & free) and i >= 2
            batch.step()
    finally:
        batch.close()
    assert reused and len(placed) == len(specs)
    for i, solo in enumerate(alone):
        got = placed[i].ids
        assert got is not None and torch.equal(got, solo), i
        assert placed[i].logp is not None and placed[i].logp.shape == solo.shape  # type: ignore[union-attr]


def test_a_draft_skips_its_blocks_without_masks_and_gets_its_solo_tokens(sdar: LoadedModel) -> None:
    """A re-masking round's draft has masks in a few blocks: the row moves past the others, and the keys of the
    blocks it skipped come from a call of their own before its next window."""
    prompt = sdar.tokenizer.encode(PREFIX)
    full = generate_blocks(sdar.lm, prompt, 2, 24, Denoiser(GREEDY, sdar.special, sdar.device), set())
    draft = full.clone()
    draft[0, 1:3] = draft[0, 13:15] = sdar.special.mask_id  # blocks 0 and 3 (the prompt ends a block)
    draft[1, 9:11] = sdar.special.mask_id  # block 2 only
    solo = generate_blocks(sdar.lm, prompt, 2, 24, Denoiser(GREEDY, sdar.special, sdar.device), set(),
                           initial=draft, step="dynamic")
    batch = RowwiseBatch(_lm(sdar), sdar.special, capacity=4, length=64, capture=False, stop_ids=set())
    try:
        other = batch.place(prompt[:11], 1, 12, GREEDY)  # a fill beside it
        batch.step()
        placed = batch.place(prompt, 2, 24, GREEDY, initial=draft)
        while batch.busy:
            batch.step()
    finally:
        batch.close()
    assert placed.ids is not None and torch.equal(placed.ids, solo)
    assert placed.model_calls < 24 // 4 * 4  # only blocks with masks were denoised
    assert other.ids is not None and torch.equal(other.ids, generate_blocks(
        sdar.lm, prompt[:11], 1, 12, Denoiser(GREEDY, sdar.special, sdar.device), set()))


def test_a_fill_past_the_batch_columns_waits_and_no_later_fill_passes_it(sdar: LoadedModel,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(block_graph, "BUCKET", 4)  # columns as the first fills need (else the tiny model's window)
    short, long = _request(len(PREFIX) - 20, 8), FillRequest(PREFIX * 4, SUFFIX, max_tokens=8, sampler=GREEDY)
    later = _request(5, 8)
    scheduler = BlockScheduler(sdar, capacity=4)
    scheduler.admit(short)
    left = scheduler.step()
    batch = scheduler.batch
    assert batch is not None and not scheduler.fits(long)  # longer than the batch's columns
    waited = scheduler.admit(long)
    assert waited.rows is None and not scheduler.fits(later)  # rows are free, but the long fill came first
    while scheduler.busy:
        left += scheduler.step()
        if waited.rows is not None:
            assert scheduler.batch is not batch  # it started the next batch, shaped for it
    assert {id(fill_) for fill_ in left} >= {id(waited)}
    _same(waited.result, fill(sdar, long))
    _same(left[0].result, fill(sdar, short))


def test_a_cancelled_fill_leaves_at_the_next_step_and_the_others_keep_their_tokens(sdar: LoadedModel) -> None:
    requests = [_request(0, 16), _request(9, 16, 2), _request(5, 12)]
    scheduler = BlockScheduler(sdar, capacity=4)
    victim = Ticket()
    fills = [scheduler.admit(request, cancel) for request, cancel in zip(requests, [None, victim, None],
                                                                          strict=True)]
    scheduler.step()
    victim.cancel()
    left = scheduler.step()
    assert fills[1] in left and isinstance(fills[1].error, Cancelled)
    rows = fills[1].rows
    assert rows is not None and set(rows.rows) <= set(scheduler.batch.free)  # type: ignore[union-attr]
    while scheduler.busy:
        scheduler.step()
    _same(fills[0].result, fill(sdar, requests[0]))
    _same(fills[2].result, fill(sdar, requests[2]))


def test_drafts_join_a_running_batch_of_drafts_with_their_solo_texts(sdar: LoadedModel) -> None:
    drafts = [FillRequest(PREFIX[:len(PREFIX) - k], SUFFIX, max_tokens=12, sampler=GREEDY, candidates=c,
                          draft=Draft(text, noise=noise, spans=spans))
              for k, c, text, noise, spans in [(0, 1, "threadIdx.x + blockIdx.x * 4;", 0.0, ((0, 9),)),
                                               (9, 2, "blockIdx.x * 4", 0.5, ()), (17, 1, "n", 0.0, ((0, 1),))]]
    scheduler = BlockScheduler(sdar, capacity=4)
    fills = [scheduler.admit(drafts[0])]
    scheduler.step()
    fills += [scheduler.admit(draft) for draft in drafts[1:]]
    while scheduler.busy:
        scheduler.step()
    for fill_, draft in zip(fills, drafts, strict=True):
        _same(fill_.result, fill(sdar, draft))


def test_fills_and_drafts_of_other_samplers_share_a_batch_with_their_solo_texts(sdar: LoadedModel) -> None:
    """An editor's completion is a fill, then re-masking rounds (drafts, greedy, fewer steps): on a team server they
    meet other editors' fills; each row is committed by its own request's sampler, in one batch."""
    draft = FillRequest(PREFIX[:len(PREFIX) - 9], SUFFIX, max_tokens=12, sampler=SamplerConfig(steps=2),
                        draft=Draft("threadIdx.x + blockIdx.x * 4;", spans=((0, 9),)))
    requests = [_request(0, 24), draft, _request(5, 12, 2, SAMPLERS[1]), _request(17, 16, sampler=SAMPLERS[2])]
    scheduler = BlockScheduler(sdar, capacity=8)
    fills = [scheduler.admit(request) for request in requests[:2]]
    scheduler.step()
    fills += [scheduler.admit(request) for request in requests[2:]]
    scheduler.step()
    assert scheduler.batch is not None and len(scheduler.batch.denoisers) == 4
    while scheduler.busy:
        scheduler.step()
    for fill_, request in zip(fills, requests, strict=True):
        _same(fill_.result, fill(sdar, request))


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
            if check == 2:  # the first fill's second call is next: the late one is queued now and joins for its third
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


def test_the_model_host_runs_queued_fills_and_drafts_of_any_sampler_as_one_batch(sdar_dir: Path,
                                                                                  sdar: LoadedModel) -> None:
    """Queued behind a busy model, a fill, another editor's fill of another sampler and a re-masking round's draft
    start as one batch (one queue key for block fills), each with its solo texts."""
    draft = FillRequest(PREFIX[:len(PREFIX) - 9], SUFFIX, max_tokens=12, sampler=SamplerConfig(steps=2),
                        draft=Draft("threadIdx.x + blockIdx.x * 4;", spans=((0, 9),)))
    requests = [_request(0, 16), draft, _request(5, 12, sampler=SAMPLERS[1])]
    alone = [fill(sdar, request) for request in requests]
    host = ModelHost(lambda status: None, max_batch_rows=8)
    host.load(Settings(model=str(sdar_dir), device="cpu", dtype="float32")).result()
    try:
        gate = threading.Event()
        host.submit(lambda model: gate.wait(30))
        before = host.fill_batches
        futures = [host.fill(request, Ticket()) for request in requests]
        gate.set()
        for future, solo in zip(futures, alone, strict=True):
            _same(future.result(), solo)
        assert host.fill_batches - before == 1
    finally:
        assert host.close(30)


def test_fills_admitted_together_beyond_the_free_rows_wait_for_rows_instead_of_failing(sdar: LoadedModel) -> None:
    """The host asks `fits` of each queued fill, then admits them together: each fits the free rows alone, not both
    (a 16-editor load on the team server found it); the second waits and joins when rows are free."""
    first, second, third = _request(0, 24), _request(9, 12), _request(5, 8)
    scheduler = BlockScheduler(sdar, capacity=2)
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
    """An editor that types on cancels its completion: a fill waiting for rows leaves at the next step, never
    placed (no prompt call, no rows), and the batch's fills keep their tokens."""
    first, second = _request(0, 8), _request(9, 24)
    scheduler = BlockScheduler(sdar, capacity=1)
    placed = scheduler.admit(first)
    scheduler.step()
    ticket = Ticket()
    waiting = scheduler.admit(second, ticket)  # no free row: it waits
    assert waiting.rows is None and waiting in scheduler.waiting
    ticket.cancel()
    left = scheduler.step()
    assert waiting in left and isinstance(waiting.error, Cancelled) and waiting.rows is None
    while scheduler.busy:
        scheduler.step()
    _same(placed.result, fill(sdar, first))


@pytest.mark.parametrize(("max_rows", "rowwise"), [(8, True), (1, False)], ids=["batching", "unbatched"])
def test_a_host_warms_up_on_the_path_its_fills_take(sdar_dir: Path, max_rows: int, rowwise: bool) -> None:
    """A batching host's load completes its warm-up kernel through the step scheduler (the rowwise batch's stepper
    is made then, not in the first editor's completion); a host of one row warms up the solo path it runs."""
    host = ModelHost(lambda status: None, max_batch_rows=max_rows)
    host.load(Settings(model=str(sdar_dir), device="cpu", dtype="float32")).result()
    try:
        kept = block_graph._STEPPERS.get(_lm(host.model()), {})
        assert any(key[-1] for key in kept) is rowwise  # key: rows, columns, capture, padded, rowwise
    finally:
        assert host.close(30)
