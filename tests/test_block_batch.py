"""Block-diffusion fills of several requests in one batch (`sampling.generate_blocks_batch`): a team server with an
SDAR/DICE checkpoint runs the fills queued together as one denoising batch. Every request must get the tokens
it gets alone, whatever its prompt length, region, candidates or stop; on a tiny random SDAR checkpoint in fp32
on the CPU, through the dynamic cache, the static step and recomputation, and through `fill_batch` and the
model host."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from dice_lsp.engine import Draft, FillRequest, SamplerConfig, batch_key, batch_rows, fill, fill_batch, load_model
from dice_lsp.engine.block_graph import _STEPPERS
from dice_lsp.engine.model import LoadedModel
from dice_lsp.engine.sampling import Denoiser, block_layout, generate_blocks, generate_blocks_batch
from dice_lsp.jobs.model_host import ModelHost, Ticket
from dice_lsp.settings import Settings

from .test_engine import PREFIX, SUFFIX

GREEDY = SamplerConfig(steps=4, temperature=0.0)
CASES = [  # prompt tokens, candidates, region: prompts ending at every offset in a block, 1 to 4 blocks apart
    (13, 1, 12), (4, 2, 20), (7, 1, 6), (1, 1, 9), (10, 2, 16),
]


@pytest.fixture(scope="module")
def sdar(sdar_dir: Path) -> LoadedModel:
    return load_model(sdar_dir, device="cpu", dtype="float32")


def _prompts(model: LoadedModel) -> list[list[int]]:
    ids = model.tokenizer.encode(PREFIX + "x" + SUFFIX * 3)
    return [ids[:length] for length, _, _ in CASES]


def test_the_layout_pads_by_whole_blocks_so_first_decoded_blocks_share_a_column() -> None:
    prompts = [[1] * 13, [1] * 4, [1] * 7, [1]]
    pads, ends = block_layout(prompts, [12, 20, 6, 9], 4)
    assert pads == [0, 8, 8, 12]  # first decoded blocks alone: 3, 1, 1, 0 (the block a prompt's tail is in)
    assert [(pad + len(p)) // 4 for pad, p in zip(pads, prompts, strict=True)] == [3, 3, 3, 3]
    assert ends == [28, 32, 24, 24]  # each row's own end: its padding + its solo total
    assert block_layout([[1] * 13], [12], 4) == ([0], [28])  # alone: no padding


@given(st.lists(st.tuples(st.integers(0, 40), st.integers(1, 30)), min_size=1, max_size=8), st.sampled_from([1, 4, 8]))
def test_every_layout_keeps_block_boundaries_and_aligns_first_blocks(shapes: list[tuple[int, int]], size: int) -> None:
    prompts, regions = [[7] * n for n, _ in shapes], [r for _, r in shapes]
    pads, ends = block_layout(prompts, regions, size)
    assert min(pads) == 0 and all(pad % size == 0 for pad in pads)
    assert len({(pad + len(p)) // size for pad, p in zip(pads, prompts, strict=True)}) == 1
    for pad, end, prompt, region in zip(pads, ends, prompts, regions, strict=True):
        assert end - pad == -(-(len(prompt) + region) // size) * size  # its solo total, shifted by its padding


@pytest.mark.parametrize("step", ["dynamic", "static", "recompute"])
@pytest.mark.parametrize("stop", [False, True], ids=["no-stop", "stop-token"])
def test_a_batch_of_prompts_gives_each_its_solo_tokens(sdar: LoadedModel, step: str, stop: bool) -> None:
    prompts = _prompts(sdar)
    candidates = [count for _, count, _ in CASES]
    regions = [region for _, _, region in CASES]
    # a stop token the tiny model does write: the most frequent token of a solo run, so requests stop apart
    probe = generate_blocks(sdar.lm, prompts[0], 1, 24, Denoiser(GREEDY, sdar.special, sdar.device), set())
    stop_ids = {int(probe[0].mode().values)} if stop else set()
    use_cache, path = step != "recompute", "dynamic" if step == "recompute" else step
    alone = [generate_blocks(sdar.lm, prompt, count, region, Denoiser(GREEDY, sdar.special, sdar.device), stop_ids,
                             use_cache=use_cache, step=path)  # type: ignore[arg-type]
             for prompt, count, region in zip(prompts, candidates, regions, strict=True)]
    denoiser = Denoiser(GREEDY, sdar.special, sdar.device)
    together = generate_blocks_batch(sdar.lm, prompts, candidates, regions, denoiser, stop_ids, use_cache=use_cache,
                                     step=path)  # type: ignore[arg-type]
    for solo, batched in zip(alone, together, strict=True):
        assert batched.shape == solo.shape and torch.equal(batched, solo)
    assert not any((out == sdar.special.mask_id).any() for out in together)
    if step == "static":  # 7 rows ran in a stepper of 8 (rounded up, so nearby batch sizes share a graph)
        assert (8, 256, False, True, False) in _STEPPERS[sdar.lm]  # type: ignore[index]
    if stop:  # some requests stopped before their region's end, at different blocks
        lengths = {out.shape[1] for out in together}
        assert len(lengths) > 1
        assert any(out.shape[1] < -(-(len(p) + r) // 4) * 4 - len(p) for out, p, r in zip(together, prompts, regions,
                                                                                          strict=True))


def test_fill_batch_of_block_requests_equals_each_fill_alone(sdar: LoadedModel) -> None:
    cut = [len(PREFIX) - 20, len(PREFIX), len(PREFIX) - 5]
    requests = [FillRequest(PREFIX[:n], SUFFIX, max_tokens=m, candidates=c, sampler=GREEDY)
                for n, m, c in zip(cut, [8, 12, 6], [1, 2, 1], strict=True)]
    keys = {batch_key(sdar, request) for request in requests}
    assert keys == {("blocks", GREEDY)}
    together = fill_batch(sdar, requests)
    for request, batched in zip(requests, together, strict=True):
        solo = fill(sdar, request)
        assert batched.texts == solo.texts
        assert batched.scores == pytest.approx(solo.scores, abs=1e-5)
        assert batched.canvases == solo.canvases
    assert together[0].model_calls == together[1].model_calls >= max(fill(sdar, r).model_calls for r in requests)


def test_a_block_fill_takes_a_row_per_candidate_whatever_its_canvases(sdar: LoadedModel, native_dir: Path) -> None:
    request = FillRequest(PREFIX, SUFFIX, max_tokens=12, candidates=2, lengths=(4, 12))
    assert batch_rows(sdar, request) == 2  # the region is generated once per candidate
    assert batch_rows(load_model(native_dir, device="cpu", dtype="float32"), request) == 4  # in place: per canvas


def test_drafts_of_a_block_model_batch_apart_from_fills_with_their_solo_texts(sdar: LoadedModel) -> None:
    """Re-masking rounds (drafts: every block denoised, stops dropped) batch among themselves."""
    sampled = SamplerConfig(steps=4, temperature=0.0, seed=3)
    drafts = [FillRequest(PREFIX[:len(PREFIX) - k], SUFFIX, max_tokens=8, sampler=sampled, candidates=c,
                          draft=Draft(text, noise=noise, spans=spans))
              for k, c, text, noise, spans in [(0, 1, "threadIdx.x;", 0.0, ((0, 9),)),
                                               (9, 2, "blockIdx.x * 4", 0.5, ()), (17, 1, "n", 0.0, ((0, 1),))]]
    assert {batch_key(sdar, r) for r in drafts} == {("block drafts", sampled)}
    assert batch_key(sdar, FillRequest(PREFIX, SUFFIX, sampler=sampled)) == ("blocks", sampled)
    together = fill_batch(sdar, drafts)
    for request, batched in zip(drafts, together, strict=True):
        solo = fill(sdar, request)
        assert batched.texts == solo.texts and batched.canvases == solo.canvases
        assert batched.scores == pytest.approx(solo.scores, abs=1e-5)
    assert together[0].model_calls == together[1].model_calls  # one batch


def test_the_model_host_batches_queued_block_fills(sdar_dir: Path) -> None:
    """Fills queued while the model is busy run as one batch, each answered with its solo fill."""
    host = ModelHost(lambda status: None, max_batch_rows=8)
    try:
        host.load(Settings(model=str(sdar_dir), device="cpu", dtype="float32")).result()
        requests = [FillRequest(PREFIX[:len(PREFIX) - k], SUFFIX, max_tokens=8, sampler=GREEDY) for k in (0, 9, 17)]
        alone = [host.submit(lambda model, r=request: fill(model, r)).result() for request in requests]
        before = (host.fills, host.fill_batches, host.fill_steps, host.step_rows)
        gate = threading.Event()
        held = host.submit(lambda model: gate.wait(30))  # the fills queue behind it and start as one batch
        futures = [host.fill(request, Ticket()) for request in requests]
        gate.set()
        assert held.result() is True
        assert [future.result().texts for future in futures] == [result.texts for result in alone]
        assert (host.fills - before[0], host.fill_batches - before[1]) == (3, 1)
        calls = [future.result().model_calls for future in futures]  # the calls each fill took part in
        assert calls == [result.model_calls for result in alone]  # each row denoised as it is alone
        assert (host.fill_steps - before[2], host.step_rows - before[3]) == (max(calls), sum(calls))
    finally:
        assert host.close(30)
