"""The engine on a CUDA GPU: automatic device and dtype, both families, cache equivalence, and the CUDA-graph
block step (replayed tokens equal the uncaptured static step's, bf16 and fp32; no device wait per step)."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import torch

from dice_lsp.engine import FillRequest, SamplerConfig, fill, load_model
from dice_lsp.engine.block_graph import _STEPPERS
from dice_lsp.engine.block_scheduler import BlockScheduler
from dice_lsp.engine.model import LoadedModel
from dice_lsp.engine.sampling import Denoiser, generate_blocks, generate_blocks_batch

from .test_engine import PREFIX, SUFFIX

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("family", ["native", "sdar"])
def test_auto_device_is_cuda_bf16_and_fills(family: str, native_dir: Path, sdar_dir: Path) -> None:
    model = load_model(native_dir if family == "native" else sdar_dir)
    assert model.device.type == "cuda" and model.dtype == torch.bfloat16
    result = fill(model, FillRequest("__global__ void k(float* x) {\n", "\n}\n", max_tokens=16, candidates=4,
                                     sampler=SamplerConfig(steps=4, temperature=0.8)))
    assert len(result.texts) == 4 and result.model_calls >= 4


def test_cpu_override_still_works_on_a_gpu_machine(native_dir: Path) -> None:
    model = load_model(native_dir, device="cpu", dtype="float32")
    assert model.device.type == "cpu" and next(model.lm.parameters()).dtype == torch.float32  # type: ignore[attr-defined]


def test_sdar_cache_matches_recompute_on_gpu(sdar_dir: Path) -> None:
    model = load_model(sdar_dir, dtype="float32")
    prompt = model.tokenizer.encode("__global__ void k(float* x) {\n    int i = ")

    def run(use_cache: bool) -> torch.Tensor:
        denoiser = Denoiser(SamplerConfig(steps=2), model.special, model.device)
        return generate_blocks(model.lm, prompt, 2, 16, denoiser, set(), use_cache=use_cache, step="dynamic")

    assert torch.equal(run(True), run(False))


def _blocks(model: LoadedModel, step: str, rows: int, sampler: SamplerConfig,
            new: int = 24) -> tuple[torch.Tensor, int]:
    denoiser = Denoiser(sampler, model.special, model.device)
    prompt = model.tokenizer.encode(PREFIX)
    out = generate_blocks(model.lm, prompt, rows, new, denoiser, set(), step=step)  # type: ignore[arg-type]
    return out, denoiser.model_calls


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
@pytest.mark.parametrize("rows", [1, 4])
def test_graph_replay_tokens_equal_the_uncaptured_static_step(sdar_dir: Path, dtype: str, rows: int) -> None:
    model = load_model(sdar_dir, dtype=dtype)
    assert model.device.type == "cuda"
    for sampler in (SamplerConfig(steps=4, temperature=0.0), SamplerConfig(steps=1, temperature=0.0),
                    SamplerConfig(strategy="threshold", threshold=0.3, steps=4, temperature=0.0),
                    SamplerConfig(steps=2, temperature=0.8, seed=5)):
        static, static_calls = _blocks(model, "static", rows, sampler)
        graph, graph_calls = _blocks(model, "graph", rows, sampler)
        again, _ = _blocks(model, "graph", rows, sampler)  # the captured graph replayed by a second generation
        assert static.shape[0] == rows and not (static == model.special.mask_id).any()
        assert torch.equal(graph, static), sampler
        assert torch.equal(again, static) and graph_calls == static_calls
    captured = [s for s in _STEPPERS[model.lm].values() if s.graph is not None]  # type: ignore[index]
    assert captured, "the graph path ran uncaptured"


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_a_batch_of_prompts_replays_its_uncaptured_static_step(sdar_dir: Path, dtype: str) -> None:
    """Prompts of other lengths padded to one layout (`generate_blocks_batch`): the captured step, whose mask hides
    each row's padding, gives the uncaptured static step's tokens; in fp32 each request's solo tokens too."""
    model = load_model(sdar_dir, dtype=dtype)
    ids = model.tokenizer.encode(PREFIX + SUFFIX * 2)
    prompts, candidates, regions = [ids[:13], ids[:4], ids[:7], ids[:1]], [1, 2, 1, 1], [12, 20, 6, 9]
    greedy = SamplerConfig(steps=4, temperature=0.0)

    def run(step: str) -> list[torch.Tensor]:
        denoiser = Denoiser(greedy, model.special, model.device)
        return generate_blocks_batch(model.lm, prompts, candidates, regions, denoiser, set(),
                                     step=step)  # type: ignore[arg-type]

    static, graph, again = run("static"), run("graph"), run("graph")
    assert all(torch.equal(a, b) and torch.equal(a, c) for a, b, c in zip(static, graph, again, strict=True))
    assert any(key[3] and s.graph is not None for key, s in _STEPPERS[model.lm].items())  # type: ignore[index]
    if dtype == "float32":
        for prompt, count, region, batched in zip(prompts, candidates, regions, graph, strict=True):
            denoiser = Denoiser(greedy, model.special, model.device)
            assert torch.equal(generate_blocks(model.lm, prompt, count, region, denoiser, set(), step="dynamic"),
                               batched)


def test_auto_on_cuda_is_the_graph_step(sdar_dir: Path) -> None:
    model = load_model(sdar_dir, dtype="bfloat16")
    greedy = SamplerConfig(steps=2, temperature=0.0)
    auto, _ = _blocks(model, "auto", 2, greedy)
    assert any(s.graph is not None for s in _STEPPERS[model.lm].values())  # type: ignore[index]
    assert torch.equal(auto, _blocks(model, "graph", 2, greedy)[0])


def test_graph_step_waits_for_the_device_once_per_block_not_per_step(sdar_dir: Path) -> None:
    model = load_model(sdar_dir, dtype="bfloat16")
    greedy = SamplerConfig(steps=4, temperature=0.0)
    _blocks(model, "graph", 1, greedy)  # capture outside the count
    denoiser = Denoiser(greedy, model.special, model.device)  # its constant tensors: outside the count too
    prompt = model.tokenizer.encode(PREFIX)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("warn")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = generate_blocks(model.lm, prompt, 1, 24, denoiser, set(), step="graph")
    finally:
        torch.cuda.set_sync_debug_mode("default")
    waits = [w for w in caught if "synchroniz" in str(w.message)]
    blocks = -(-out.shape[1] // 4)
    assert denoiser.model_calls > 3 * blocks > blocks + 3  # one wait per step would exceed the bound below
    # the prompt and the stop ids sent to the device, the masks counted once, one stop check per block
    assert 1 <= len(waits) <= blocks + 3, [str(w.message) for w in waits]


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_fills_that_join_a_captured_block_batch_replay_its_uncaptured_static_step(sdar_dir: Path, dtype: str) -> None:
    """Fills that join a running batch at the next step (`BlockScheduler`: rows at their own blocks and positions,
    prompt keys by a call of their own): the captured step gives the uncaptured static step's texts; in fp32 each
    fill's solo texts."""
    model = load_model(sdar_dir, dtype=dtype)
    greedy = SamplerConfig(steps=4, temperature=0.0)
    requests = [FillRequest(PREFIX[:len(PREFIX) - cut], SUFFIX, max_tokens=tokens, candidates=count, sampler=greedy)
                for cut, tokens, count in [(0, 24, 1), (9, 12, 2), (30, 16, 1), (3, 8, 1)]]

    def run(capture: bool) -> list[list[str]]:
        scheduler = BlockScheduler(model, capacity=8, capture=capture)
        fills = [scheduler.admit(requests[0])]
        scheduler.step()
        for request in requests[1:]:  # each joins the running batch at the next step
            fills.append(scheduler.admit(request))
            scheduler.step()
        while scheduler.busy:
            scheduler.step()
        return [fill_.result.texts if fill_.result is not None else [] for fill_ in fills]

    static, graph, again = run(False), run(True), run(True)
    assert static == graph == again and all(static)
    assert any(key[4] and s.graph is not None for key, s in _STEPPERS[model.lm].items())  # type: ignore[index]
    if dtype == "float32":
        assert graph == [fill(model, request).texts for request in requests]
