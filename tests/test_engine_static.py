"""The static-shape block step (preallocated cache, fixed window; `block_graph.py`) decodes the same tokens
as the dynamic cache, on a tiny random SDAR checkpoint in fp32 on the CPU (the captured replay of the same
step is checked on a GPU in tests/test_engine_gpu.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from dice_lsp.engine import SamplerConfig, fused, load_model
from dice_lsp.engine.block_graph import BUCKET, block_stepper, cache_length
from dice_lsp.engine.model import LoadedModel
from dice_lsp.engine.sampling import Denoiser, generate_blocks, planned_calls
from dice_lsp.engine.transformer import StaticKVCache, Transformer
from dice_lsp.errors import Cancelled, DiceError

from .test_engine import PREFIX


@pytest.fixture(scope="module")
def sdar(sdar_dir: Path) -> LoadedModel:
    return load_model(sdar_dir, device="cpu", dtype="float32")


def _generate(model: LoadedModel, step: str, rows: int, sampler: SamplerConfig, prompt: list[int],
              new: int = 24, stop_ids: frozenset[int] = frozenset(), initial: torch.Tensor | None = None,
              ) -> tuple[torch.Tensor, Denoiser]:
    denoiser = Denoiser(sampler, model.special, model.device)
    out = generate_blocks(model.lm, prompt, rows, new, denoiser, set(stop_ids), initial=initial,
                          step=step)  # type: ignore[arg-type]
    return out, denoiser


@pytest.mark.parametrize("rows", [1, 3])
@pytest.mark.parametrize("steps", [1, 2, 4, 3])
@pytest.mark.parametrize("prompt_cut", [None, 2, 4], ids=["prompt", "2-token-prompt", "one-block-prompt"])
def test_static_step_tokens_equal_the_dynamic_cache(sdar: LoadedModel, rows: int, steps: int,
                                                    prompt_cut: int | None) -> None:
    """Greedy, several blocks (24 new tokens: 6+ blocks of 4), prompts ending inside a block and at 0..4."""
    prompt = sdar.tokenizer.encode(PREFIX)[:prompt_cut]
    greedy = SamplerConfig(steps=steps, temperature=0.0)
    dynamic, d_den = _generate(sdar, "dynamic", rows, greedy, prompt)
    static, s_den = _generate(sdar, "static", rows, greedy, prompt)
    assert dynamic.shape == (rows, 24 + (-(len(prompt) + 24)) % 4) and not (dynamic == sdar.special.mask_id).any()
    assert torch.equal(static, dynamic)
    assert s_den.model_calls == d_den.model_calls
    assert torch.equal(s_den.logp.isnan(), d_den.logp.isnan())  # type: ignore[union-attr]
    assert torch.allclose(s_den.logp.nan_to_num(), d_den.logp.nan_to_num(), atol=1e-5)  # type: ignore[union-attr]


@pytest.mark.parametrize("sampler", [
    SamplerConfig(strategy="threshold", threshold=0.2, steps=4, temperature=0.0),
    SamplerConfig(strategy="entropy", steps=4, temperature=0.0),
    SamplerConfig(steps=2, temperature=0.8, top_k=20, seed=3),
], ids=["threshold", "entropy", "sampled"])
def test_static_step_equals_dynamic_for_the_other_samplers(sdar: LoadedModel, sampler: SamplerConfig) -> None:
    prompt = sdar.tokenizer.encode(PREFIX)
    dynamic, d_den = _generate(sdar, "dynamic", 2, sampler, prompt)
    static, s_den = _generate(sdar, "static", 2, sampler, prompt)
    assert torch.equal(static, dynamic) and s_den.model_calls == d_den.model_calls


def test_static_step_stops_and_drafts_like_the_dynamic_cache(sdar: LoadedModel) -> None:
    prompt = sdar.tokenizer.encode(PREFIX)
    greedy = SamplerConfig(steps=2, temperature=0.0)
    full, _ = _generate(sdar, "dynamic", 1, greedy, prompt, new=32)
    stop = int(full[0, 9])  # a token of the third block: the generation stops at the end of that block
    dynamic, d_den = _generate(sdar, "dynamic", 1, greedy, prompt, new=32, stop_ids=frozenset({stop}))
    static, s_den = _generate(sdar, "static", 1, greedy, prompt, new=32, stop_ids=frozenset({stop}))
    assert torch.equal(static, dynamic) and static.shape[1] < 32 and s_den.model_calls == d_den.model_calls
    draft = full[:, :16].clone().repeat(2, 1)
    draft[0, 3:7] = sdar.special.mask_id  # rows with different masks: the plan differs per row
    draft[1, 10:16] = sdar.special.mask_id
    dynamic, d_den = _generate(sdar, "dynamic", 2, greedy, prompt, new=16, initial=draft)
    static, s_den = _generate(sdar, "static", 2, greedy, prompt, new=16, initial=draft)
    assert torch.equal(static, dynamic) and s_den.model_calls == d_den.model_calls > 0


def test_a_draft_block_without_masks_leaves_the_block_before_it_written(sdar: LoadedModel) -> None:
    """A re-masking round's draft: masks in a block, none in the next, masks after. The mask-free block needs
    no call, so the block before it was never written with its final tokens by a window step; the next call
    writes it (the dynamic cache and recomputation do), else its keys are those of its masked tokens."""
    prompt = sdar.tokenizer.encode(PREFIX)
    assert len(prompt) % 4 == 0  # the region starts a block: block 0 masked, block 1 not, block 2 masked
    greedy = SamplerConfig(steps=2, temperature=0.0)
    full, _ = _generate(sdar, "dynamic", 1, greedy, prompt)
    draft = full.clone()
    draft[0, 0:3] = sdar.special.mask_id
    draft[0, 8:10] = sdar.special.mask_id
    dynamic, d_den = _generate(sdar, "dynamic", 1, greedy, prompt, initial=draft)
    static, s_den = _generate(sdar, "static", 1, greedy, prompt, initial=draft)
    recomputed = generate_blocks(sdar.lm, prompt, 1, 24, Denoiser(greedy, sdar.special, sdar.device), set(),
                                 use_cache=False, initial=draft)
    assert torch.equal(dynamic, recomputed) and not (dynamic == sdar.special.mask_id).any()
    assert torch.equal(static, dynamic) and s_den.model_calls == d_den.model_calls == 4


def test_a_reused_stepper_gives_the_same_tokens(sdar: LoadedModel) -> None:
    """The second generation of a shape reuses the stepper: what the first left in its cache is masked."""
    greedy = SamplerConfig(steps=2, temperature=0.0)
    long_prompt = sdar.tokenizer.encode(PREFIX * 2)
    short_prompt = sdar.tokenizer.encode(PREFIX)[:7]
    first, _ = _generate(sdar, "static", 1, greedy, short_prompt)
    _generate(sdar, "static", 1, greedy, long_prompt)
    again, _ = _generate(sdar, "static", 1, greedy, short_prompt)
    assert torch.equal(first, again)
    assert torch.equal(first, _generate(sdar, "dynamic", 1, greedy, short_prompt)[0])


def test_static_cache_writes_in_place_and_masks_later_blocks(sdar: LoadedModel) -> None:
    lm = sdar.lm
    assert isinstance(lm, Transformer)
    cache = lm.new_static_cache(rows=2, max_len=16)
    keys = cache.keys
    ids = torch.randint(10, 300, (2, 12))
    out = lm.static_forward(ids, torch.arange(12), cache, slice(8, 12))
    assert torch.allclose(out, lm(ids)[:, 8:12], atol=1e-5)
    assert cache.keys is keys and keys[:, :, :, 12:].abs().sum() == 0 and keys[:, :, :, :12].abs().sum() > 0
    window = lm.static_forward(ids[:, 4:12], torch.arange(4, 12), cache, slice(4, 8))
    assert torch.allclose(window, lm(ids)[:, 8:12], atol=1e-5)
    cache.positions = torch.arange(4, 8)
    assert cache.mask().tolist() == [[k < 8 for k in range(16)]] * 4


@pytest.mark.parametrize("matrices", [True, False], ids=["rotation-matrices", "cos-sin"])
def test_positions_per_row_place_each_row_where_it_is_alone(sdar: LoadedModel, matrices: bool,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A static call with positions [rows, T] (rows at different blocks): each row's logits and keys are those
    of its own call at its own positions; the other rows' columns of its cache are untouched."""
    if not matrices:
        monkeypatch.setattr(fused, "ROPE_MATRIX_ROWS", 0)
    lm = sdar.lm
    assert isinstance(lm, Transformer)
    ids = torch.randint(10, 300, (3, 24))
    starts = [0, 8, 16]
    positions = torch.stack([torch.arange(start, start + 8) for start in starts])
    together = lm.new_static_cache(rows=3, max_len=24)
    for i, start in enumerate(starts):  # every row's earlier blocks, written alone
        alone = lm.new_static_cache(rows=1, max_len=24)
        if start:
            lm.static_forward(ids[i:i + 1, :start], torch.arange(start), alone, slice(start - 1, start))
        together.keys[:, i], together.values[:, i] = alone.keys[:, 0], alone.values[:, 0]
    window = torch.stack([ids[i, start:start + 8] for i, start in enumerate(starts)])
    out = lm.static_forward(window, positions, together, slice(4, 8))
    for i, start in enumerate(starts):
        alone = lm.new_static_cache(rows=1, max_len=24)
        expected = lm.static_forward(ids[i:i + 1, :start + 8], torch.arange(start + 8), alone,
                                     slice(start + 4, start + 8))
        assert torch.allclose(out[i], expected[0], atol=1e-5)
        assert torch.allclose(together.keys[:, i, :, :start + 8], alone.keys[:, 0, :, :start + 8], atol=1e-5)
        assert together.keys[:, i, :, start + 8:].abs().sum() == 0


def test_static_cache_refuses_bad_shapes(sdar: LoadedModel) -> None:
    cfg = sdar.lm.config
    with pytest.raises(ValueError, match="multiple of the block size"):
        StaticKVCache(cfg, 1, 10, torch.device("cpu"), torch.float32)
    with pytest.raises(ValueError, match="window"):
        StaticKVCache(cfg, 1, cfg.max_position_embeddings + 4, torch.device("cpu"), torch.float32)
    assert isinstance(sdar.lm, Transformer)
    with pytest.raises(ValueError, match="rows"):
        sdar.lm.static_forward(torch.zeros((2, 8), dtype=torch.long), torch.arange(8),
                               sdar.lm.new_static_cache(1, 16), slice(4, 8))


def test_graph_step_fails_loudly_without_cuda_and_auto_stays_dynamic_on_cpu(sdar: LoadedModel) -> None:
    prompt = sdar.tokenizer.encode(PREFIX)
    greedy = SamplerConfig(steps=2, temperature=0.0)
    with pytest.raises(DiceError, match="CUDA"):
        _generate(sdar, "graph", 1, greedy, prompt)
    assert isinstance(sdar.lm, Transformer)
    with pytest.raises(DiceError, match="CUDA"), block_stepper(sdar.lm, 1, 64, capture=True):
        pass
    auto, _ = _generate(sdar, "auto", 1, greedy, prompt)
    assert torch.equal(auto, _generate(sdar, "dynamic", 1, greedy, prompt)[0])


def test_cancellation_is_checked_before_every_static_step(sdar: LoadedModel) -> None:
    calls: list[int] = []

    def cancel() -> bool:
        return len(calls) >= 3

    denoiser = Denoiser(SamplerConfig(steps=4, temperature=0.0), sdar.special, sdar.device, cancel=cancel,
                        progress=calls.append)
    with pytest.raises(Cancelled, match="after 3 model calls"):
        generate_blocks(sdar.lm, sdar.tokenizer.encode(PREFIX), 1, 24, denoiser, set(), step="static")


def test_planned_calls_follow_the_quota_rule() -> None:
    assert planned_calls([4], 4) == 4 and planned_calls([4], 2) == 2 and planned_calls([4], 1) == 1
    assert planned_calls([4], 8) == 4  # one token a call at least: a block of 4 is done in 4
    assert planned_calls([4], 3) == 3  # 2, 1, 1
    assert planned_calls([0, 0], 4) == 0 and planned_calls([1, 4], 4) == 4 and planned_calls([2], 4) == 2


def test_cache_length_is_bucketed_inside_the_window(sdar: LoadedModel) -> None:
    assert isinstance(sdar.lm, Transformer)
    window = sdar.lm.config.max_position_embeddings
    assert cache_length(sdar.lm, 8) == min(BUCKET, window)
    assert cache_length(sdar.lm, window) == window
