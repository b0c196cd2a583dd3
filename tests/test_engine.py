"""The diffusion engine on tiny random checkpoints of both families."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from dice_lsp.engine import FillRequest, SamplerConfig, batch_key, fill, fill_batch, load_model, save_native
from dice_lsp.engine.config import read_config
from dice_lsp.engine.sampling import Denoiser, fill_in_place, generate_blocks, generate_causal
from dice_lsp.engine.transformer import Transformer
from dice_lsp.errors import Cancelled, DiceError, ModelLoadError

from .conftest import edit_config

PREFIX = "__global__ void add(const float* a, float* c, int n) {\n    int i = "
SUFFIX = ";\n    if (i < n) c[i] = a[i];\n}\n"


def canvas(model, region: int, rows: int = 2) -> tuple[torch.Tensor, int]:
    prefix = model.tokenizer.encode(PREFIX)
    suffix = model.tokenizer.encode(SUFFIX)
    row = [*prefix, *([model.special.mask_id] * region), *suffix]
    return torch.tensor([row] * rows), len(prefix)


def test_in_place_fill_changes_only_masked_positions(native_dir: Path) -> None:
    model = load_model(native_dir, device="cpu", dtype="float32")
    x, lo = canvas(model, region=12)
    before = x.clone()
    fill_in_place(model.lm, x, lo, lo + 12, Denoiser(SamplerConfig(steps=4), model.special, model.device))
    outside = torch.ones(x.shape[1], dtype=torch.bool)
    outside[lo:lo + 12] = False
    assert torch.equal(x[:, outside], before[:, outside])
    assert not (x[:, lo:lo + 12] == model.special.mask_id).any()
    assert not torch.equal(x[:, lo:lo + 12], before[:, lo:lo + 12])


def test_block_generation_keeps_the_prompt_and_leaves_no_mask(sdar_dir: Path) -> None:
    model = load_model(sdar_dir, device="cpu", dtype="float32")
    prompt = model.tokenizer.encode(PREFIX)
    denoiser = Denoiser(SamplerConfig(steps=4), model.special, model.device)
    out = generate_blocks(model.lm, prompt, 2, 10, denoiser, stop_ids=set())
    assert out.shape[0] == 2 and out.shape[1] >= 10
    assert (len(prompt) + out.shape[1]) % 4 == 0, "generation ends on a block boundary"
    assert not (out == model.special.mask_id).any()


def test_low_confidence_runs_its_step_budget(native_dir: Path) -> None:
    model = load_model(native_dir, device="cpu", dtype="float32")
    result = fill(model, FillRequest(PREFIX, SUFFIX, max_tokens=16, sampler=SamplerConfig(steps=4)))
    assert result.model_calls == 4


def test_threshold_commits_all_confident_tokens_at_once(native_dir: Path) -> None:
    model = load_model(native_dir, device="cpu", dtype="float32")
    sampler = SamplerConfig(strategy="threshold", steps=8, threshold=1e-9)
    assert fill(model, FillRequest(PREFIX, SUFFIX, max_tokens=16, sampler=sampler)).model_calls == 1


def test_entropy_bound_commits_while_the_summed_uncertainty_is_small(native_dir: Path) -> None:
    model = load_model(native_dir, device="cpu", dtype="float32")
    denoiser = Denoiser(SamplerConfig(strategy="entropy", steps=8, entropy_bound=0.5), model.special, model.device)
    denoiser.entropy = torch.tensor([[0.1, 0.2, 0.3, 2.0, 0.05, 0.4]])
    confidence = torch.tensor([[0.9, 0.8, 0.7, 0.1, 0.95, 0.6]])
    masked = torch.tensor([[True, True, True, True, True, False]])
    chosen = denoiser.choose(torch.zeros(1, 6, dtype=torch.long), confidence, masked, steps_left=8)
    # most confident first: 0.05, 0.1, 0.2, 0.3 (sum less the largest: 0.35 <= 0.5), then 2.0 (2.35): four
    assert chosen.tolist() == [[True, True, True, False, True, False]]
    denoiser.entropy = torch.full((1, 6), 5.0)  # unsure everywhere: the bound lets one token through, but
    chosen = denoiser.choose(torch.zeros(1, 6, dtype=torch.long), confidence, masked, steps_left=2)
    assert chosen.tolist() == [[True, True, False, False, True, False]]  # the ceiling wants ceil(5 / 2) = 3


def test_the_floor_spreads_an_adaptive_fill_over_min_steps(native_dir: Path) -> None:
    model = load_model(native_dir, device="cpu", dtype="float32")
    eager = SamplerConfig(strategy="threshold", steps=8, threshold=1e-9)
    assert fill(model, FillRequest(PREFIX, SUFFIX, max_tokens=16, sampler=eager)).model_calls == 1
    floored = replace(eager, min_steps=3)
    assert fill(model, FillRequest(PREFIX, SUFFIX, max_tokens=16, sampler=floored)).model_calls == 3
    entropy = SamplerConfig(strategy="entropy", steps=8, entropy_bound=1000.0, min_steps=2)
    assert fill(model, FillRequest(PREFIX, SUFFIX, max_tokens=16, sampler=entropy)).model_calls == 2


def test_blockwise_decoding_spends_the_budget_per_block(native_dir: Path) -> None:
    model = load_model(native_dir, device="cpu", dtype="float32")
    sampler = SamplerConfig(steps=2, block_length=4)
    assert fill(model, FillRequest(PREFIX, SUFFIX, max_tokens=16, sampler=sampler)).model_calls == 8


@pytest.mark.parametrize("family", ["native", "sdar"])
def test_cancel_stops_within_one_step(family: str, native_dir: Path, sdar_dir: Path) -> None:
    model = load_model(native_dir if family == "native" else sdar_dir, device="cpu", dtype="float32")
    calls: list[int] = []
    request = FillRequest(PREFIX, SUFFIX, max_tokens=32, sampler=SamplerConfig(steps=16))
    with pytest.raises(Cancelled):
        fill(model, request, cancel=lambda: len(calls) >= 3, progress=calls.append)
    assert len(calls) == 3


@pytest.mark.parametrize("family", ["native", "sdar"])
def test_same_seed_same_text_other_seed_other_text(family: str, native_dir: Path, sdar_dir: Path) -> None:
    model = load_model(native_dir if family == "native" else sdar_dir, device="cpu", dtype="float32")

    def texts(seed: int) -> list[str]:
        sampler = SamplerConfig(steps=4, temperature=1.0, seed=seed)
        return fill(model, FillRequest(PREFIX, SUFFIX, max_tokens=12, candidates=3, sampler=sampler)).texts

    first = texts(7)
    assert texts(7) == first
    assert len(set(first)) > 1, "a batch of sampled candidates should differ"
    assert any(texts(seed) != first for seed in (8, 9, 10))


@pytest.mark.parametrize("tied", [False, True])
def test_save_load_round_trip_keeps_logits(native_dir: Path, tmp_path: Path, tied: bool) -> None:
    folder = tmp_path / "source"
    shutil.copytree(native_dir, folder)
    config = json.loads((folder / "config.json").read_text())
    config["tie_word_embeddings"] = tied  # the embedded model ties its output head to the embedding
    (folder / "config.json").write_text(json.dumps(config))
    model = load_model(folder, device="cpu", dtype="float32")
    save_native(model.lm, model.tokenizer, tmp_path / "copy")  # type: ignore[arg-type]
    again = load_model(tmp_path / "copy", device="cpu", dtype="float32")
    x, _ = canvas(model, region=8, rows=1)
    assert torch.equal(model.lm(x), again.lm(x))
    assert again.special == model.special


def test_sdar_kv_cache_gives_the_same_logits(sdar_dir: Path) -> None:
    model = load_model(sdar_dir, device="cpu", dtype="float32")
    ids = torch.randint(10, 300, (2, 14))
    full = model.lm(ids)
    cache = model.lm.new_cache()
    model.lm(ids[:, :12], 0, cache, keep=8)  # blocks 0-1 are kept, block 2 only looked at
    block = model.lm(ids[:, 8:12], 8, cache)
    assert torch.allclose(block, full[:, 8:12], atol=1e-5)
    # a denoising pass that keeps nothing leaves the cache as it was
    tail = model.lm(ids[:, 8:14], 8, cache)
    assert torch.allclose(tail, model.lm(ids[:, :14])[:, 8:14], atol=1e-5)
    model.lm(ids[:, 8:14], 8, cache, keep=4)
    assert torch.allclose(model.lm(ids[:, 12:14], 12, cache), full[:, 12:14], atol=1e-5)


def test_sdar_generation_is_identical_with_and_without_cache(sdar_dir: Path) -> None:
    model = load_model(sdar_dir, device="cpu", dtype="float32")
    prompt = model.tokenizer.encode(PREFIX)

    def run(use_cache: bool) -> torch.Tensor:
        denoiser = Denoiser(SamplerConfig(steps=2), model.special, model.device)
        return generate_blocks(model.lm, prompt, 1, 16, denoiser, set(), use_cache=use_cache)

    assert torch.equal(run(True), run(False))


def test_block_layout_with_block_one_matches_transformers_qwen3(sdar_dir: Path, tmp_path: Path) -> None:
    """Our transformer is Qwen3: with blocks of one token it must reproduce transformers' causal logits."""
    from transformers import Qwen3ForCausalLM

    folder = tmp_path / "qwen3"
    shutil.copytree(sdar_dir, folder)
    config = json.loads((folder / "config.json").read_text())
    config.update(model_type="qwen3", block_size=1)
    (folder / "config.json").write_text(json.dumps(config))
    ours = load_model(folder, device="cpu", dtype="float32")
    config["model_type"] = "qwen3"
    reference = Qwen3ForCausalLM.from_pretrained(str(sdar_dir), dtype=torch.float32, local_files_only=True).eval()
    ids = torch.randint(10, 300, (2, 20))
    with torch.no_grad():
        expected = reference(input_ids=ids).logits
    assert torch.allclose(ours.lm(ids), expected, atol=1e-4)


def test_remote_code_folder_is_used_when_trusted(sdar_dir: Path, tmp_path: Path) -> None:
    folder = tmp_path / "remote"
    shutil.copytree(sdar_dir, folder)
    (folder / "modeling_toy.py").write_text(
        "from transformers import Qwen3Config, Qwen3ForCausalLM\n"
        "class ToyConfig(Qwen3Config):\n    model_type = 'sdar'\n"
        "class ToySDAR(Qwen3ForCausalLM):\n    config_class = ToyConfig\n    remote_calls = 0\n"
        "    def forward(self, *args, **kwargs):\n        ToySDAR.remote_calls += 1\n"
        "        return super().forward(*args, **kwargs)\n"
    )
    config = json.loads((folder / "config.json").read_text())
    config["auto_map"] = {"AutoConfig": "modeling_toy.ToyConfig", "AutoModelForCausalLM": "modeling_toy.ToySDAR"}
    (folder / "config.json").write_text(json.dumps(config))
    remote = load_model(folder, device="cpu", dtype="float32", trust_remote_code=True)
    native = load_model(folder, device="cpu", dtype="float32")
    assert type(remote.lm).__name__ == "RemoteCodeLM"
    ids = torch.randint(10, 300, (1, 10))
    with torch.no_grad():
        assert torch.allclose(remote.lm(ids), native.lm(ids), atol=1e-4)
        cache = remote.lm.new_cache()
        remote.lm(ids[:, :10], 0, cache, keep=8)
        assert torch.allclose(remote.lm(ids[:, 8:10], 8, cache), native.lm(ids)[:, 8:10], atol=1e-4)
    sampler = SamplerConfig(steps=2)
    assert fill(remote, FillRequest(PREFIX, SUFFIX, 8, sampler=sampler)).texts == \
        fill(native, FillRequest(PREFIX, SUFFIX, 8, sampler=sampler)).texts


@pytest.mark.parametrize(("changes", "message"), [
    ({"model_type": "llama"}, "model_type 'llama' is not supported"),
    ({"hidden_size": None}, "missing hidden_size"),
    ({"hidden_size": 96}, "has shape"),
    ({"num_hidden_layers": 3}, "weights missing for model.layers.2"),
    ({"num_key_value_heads": 3}, "multiple of num_key_value_heads"),
    ({"vocab_size": 50}, "tokenizer has"),
])
def test_wrong_config_fails_with_a_clear_error(native_dir: Path, tmp_path: Path, changes: dict[str, object],
                                               message: str) -> None:
    with pytest.raises(ModelLoadError, match=message):
        load_model(edit_config(native_dir, tmp_path, **changes), device="cpu", dtype="float32")


def test_folder_without_config_or_mask_token_is_refused(native_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError, match=r"no config\.json"):
        load_model(tmp_path, device="cpu", dtype="float32")
    copy = tmp_path / "nomask"
    shutil.copytree(native_dir, copy)
    (copy / "tokenizer_config.json").write_text(json.dumps({"eos_token": "<|eos|>"}))
    with pytest.raises(ModelLoadError, match="no mask token"):
        load_model(copy, device="cpu", dtype="float32")


def test_context_cache_is_exact_for_one_layer(native_dir: Path, tmp_path: Path) -> None:
    """With one layer the context's keys/values cannot depend on the canvas: reuse must change nothing."""
    cfg, _ = read_config(native_dir)
    model = Transformer(replace(cfg, num_hidden_layers=1))
    model.init_weights(std=0.3, generator=torch.Generator().manual_seed(1))
    loaded = load_model(native_dir, device="cpu", dtype="float32")
    save_native(model, loaded.tokenizer, tmp_path / "one")
    one = load_model(tmp_path / "one", device="cpu", dtype="float32")
    for block_length in (None, 4):
        cached, exact = (fill(one, FillRequest(PREFIX, SUFFIX, max_tokens=12, sampler=SamplerConfig(
            steps=6, block_length=block_length, context_cache=flag))) for flag in (True, False))
        assert cached.texts == exact.texts and cached.model_calls == exact.model_calls
        assert cached.scores == pytest.approx(exact.scores, abs=1e-5)


def test_causal_generation_with_cache_equals_greedy_recompute(native_dir: Path, tmp_path: Path) -> None:
    """The autoregressive baseline: cached one-token steps reproduce argmax over full recomputes."""
    model = load_model(edit_config(native_dir, tmp_path, attention="causal"), device="cpu", dtype="float32")
    prompt = model.tokenizer.encode(PREFIX)
    denoiser = Denoiser(SamplerConfig(), model.special, model.device)
    generated = generate_causal(model.lm, prompt, 1, 12, denoiser, set())
    assert generated.shape == (1, 12) and denoiser.model_calls == 12
    ids = torch.tensor([prompt])
    for _ in range(12):
        logits = model.lm(ids)[:, -1]
        logits[:, model.special.never_generated] = -float("inf")
        ids = torch.cat((ids, logits.argmax(-1, keepdim=True)), dim=1)
    assert torch.equal(generated, ids[:, len(prompt):])
    # and the causal layout is what Qwen3 computes: no position sees a later one
    full = model.lm(ids)
    assert torch.allclose(model.lm(ids[:, :20]), full[:, :20], atol=1e-5)


@pytest.mark.parametrize(("flags", "native"), [("fpu sse2 avx2", False), ("avx512f avx512_bf16", True),
                                               ("amx_bf16 amx_tile", True), ("fp asimd bf16 i8mm", True)])
def test_cpu_bf16_is_detected_from_cpuinfo(tmp_path: Path, flags: str, native: bool) -> None:
    from dice_lsp.engine.device import cpu_has_native_bf16

    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(f"processor\t: 0\nflags\t\t: {flags}\n")
    assert cpu_has_native_bf16(cpuinfo) is native
    assert cpu_has_native_bf16(tmp_path / "absent") is False


@pytest.mark.parametrize("context_cache", [True, False])
def test_a_batch_of_different_lengths_fills_each_region_as_alone(native_dir: Path, context_cache: bool) -> None:
    """Requests from several clients share a denoising batch: padding must not change any row's fill."""
    model = load_model(native_dir, device="cpu", dtype="float32")
    sampler = SamplerConfig(steps=4, context_cache=context_cache)
    requests = [FillRequest(PREFIX, SUFFIX, max_tokens=10, sampler=sampler),
                FillRequest("int x = ", "", max_tokens=10, sampler=sampler),
                FillRequest("#include <cuda.h>\n" + PREFIX * 3, SUFFIX * 2, max_tokens=10, sampler=sampler,
                            candidates=2)]
    alone = [fill(model, request) for request in requests]
    together = fill_batch(model, requests)
    assert [r.texts for r in together] == [r.texts for r in alone]
    assert all(r.model_calls == alone[0].model_calls for r in together)


def test_requests_of_other_shapes_do_not_share_a_batch(native_dir: Path, sdar_dir: Path) -> None:
    native = load_model(native_dir, device="cpu", dtype="float32")
    sdar = load_model(sdar_dir, device="cpu", dtype="float32")
    short, long = FillRequest(PREFIX, SUFFIX, max_tokens=8), FillRequest(PREFIX, SUFFIX, max_tokens=16)
    assert batch_key(native, short) != batch_key(native, long)
    assert batch_key(native, short) == batch_key(native, FillRequest("x", "y", max_tokens=8))
    assert batch_key(sdar, short) == batch_key(sdar, long)  # block fills batch whatever their regions
    assert batch_key(sdar, short) != batch_key(sdar, FillRequest(PREFIX, SUFFIX, sampler=SamplerConfig(steps=2)))
    with pytest.raises(DiceError, match="share a batch"):
        fill_batch(native, [short, long])


def test_canvases_of_one_request_end_within_their_length(native_dir: Path) -> None:
    """Several canvas lengths for one hole in one batch: a shorter canvas is the region with its tail forced to
    pads, so its fill never runs past its length; the longest is the plain fill of the region (exact without
    the context cache, where no row sees another's); and the shortest differs from it (the forced pads count)."""
    model = load_model(native_dir, device="cpu", dtype="float32")
    sampler = SamplerConfig(steps=4, context_cache=False)
    together = fill(model, FillRequest(PREFIX, SUFFIX, max_tokens=12, sampler=sampler, lengths=(12, 4, 8)))
    alone = fill(model, FillRequest(PREFIX, SUFFIX, max_tokens=12, sampler=sampler))
    assert together.canvases == [4, 8, 12]
    assert together.texts[2] == alone.texts[0] and together.texts[0] != together.texts[2]
    assert together.scores[2] == pytest.approx(alone.scores[0], abs=1e-5)
    pieces = max(len(model.tokenizer.decode([token])) for token in range(model.tokenizer.vocab_size))
    for text, canvas in zip(together.texts, together.canvases, strict=True):
        assert len(text) <= canvas * pieces  # no fill runs past its canvas's tokens


def test_a_fill_is_scored_by_the_log_probability_of_what_it_committed(native_dir: Path) -> None:
    """A greedy fill of one token per step: its score is the mean log-probability of its committed tokens up to
    and with the first stop, which a forward pass over the finished rows cannot exceed token by token."""
    model = load_model(native_dir, device="cpu", dtype="float32")
    result = fill(model, FillRequest(PREFIX, SUFFIX, max_tokens=6, candidates=2,
                                     sampler=SamplerConfig(steps=6, context_cache=False)))
    assert len(result.scores) == 2 and result.scores[0] == pytest.approx(result.scores[1])
    assert all(-30.0 < score <= 0.0 for score in result.scores)
    with pytest.raises(DiceError, match="lengths"):
        FillRequest(PREFIX, SUFFIX, max_tokens=6, lengths=(8,))
