"""int8 checkpoints: half the bytes of bf16, the same fills as the float model, int8 products on the CPU."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from dice_lsp.engine import FillRequest, SamplerConfig, fill, fill_batch, load_model
from dice_lsp.engine.checkpoint import EMBEDDED_MODEL, build_transformer, load_state
from dice_lsp.engine.config import read_config
from dice_lsp.engine.quant import SCALE_SUFFIX, Int8Linear, dequantize_state, quantize_state, write_int8
from dice_lsp.errors import DiceError
from dice_lsp.training.export import main
from dice_lsp.training.train import grow_depth


def test_quantize_round_trip_keeps_every_weight_within_half_a_step() -> None:
    torch.manual_seed(0)
    state = {"a.weight": torch.randn(16, 8), "norm.weight": torch.ones(8)}
    packed = quantize_state(state)
    assert packed["a.weight"].dtype == torch.int8 and packed["norm.weight"].dtype == torch.float32
    restored = dequantize_state(packed)
    assert set(restored) == set(state)
    step = packed["a.weight" + SCALE_SUFFIX][:, None]
    assert ((restored["a.weight"] - state["a.weight"]).abs() <= step / 2 + 1e-7).all()
    assert torch.equal(restored["norm.weight"], state["norm.weight"])


def test_an_int8_folder_is_a_quarter_of_fp32_and_loads_with_int8_products_on_the_cpu(
        native_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "int8"
    assert main([str(native_dir), str(out)]) == 0
    float_bytes = sum(p.stat().st_size for p in native_dir.glob("*.safetensors"))
    int8_bytes = sum(p.stat().st_size for p in out.glob("*.safetensors"))
    assert int8_bytes < 0.4 * float_bytes, "fp32 weights shrink about 4x (bf16 ones 2x)"
    quantized = load_model(out, device="cpu")
    assert quantized.int8
    linear = quantized.lm.model.layers[0].mlp.up_proj  # type: ignore[attr-defined]
    assert isinstance(linear, Int8Linear) and linear.qweight.dtype == torch.int8
    dequantized = load_model(out, device="cpu", dtype="float32")
    assert not dequantized.int8
    reference = load_model(native_dir, device="cpu", dtype="float32")
    ids = torch.tensor([list(range(3, 40))])
    with torch.no_grad():
        ref, deq = reference.lm(ids), dequantized.lm(ids)
    assert float((ref - deq).norm() / ref.norm()) < 0.05
    result = fill(quantized, FillRequest("__global__ void add(", ")", max_tokens=8, sampler=SamplerConfig(steps=4)))
    assert result.model_calls == 4 and isinstance(result.texts[0], str)


def test_the_shipped_model_in_int8_keeps_its_top_token_almost_everywhere(tmp_path: Path) -> None:
    write_int8(EMBEDDED_MODEL, tmp_path / "int8")
    reference = load_model(None, device="cpu", dtype="float32")
    text = (Path(__file__).resolve().parents[1] / "examples" / "vector_add.cu").read_text()
    ids = torch.tensor([reference.tokenizer.encode(text)[:256]])
    with torch.no_grad():
        ref = reference.lm(ids).argmax(-1)
        for dtype in (None, "float32"):  # int8 products (the CPU default), dequantized floats
            other = load_model(tmp_path / "int8", device="cpu", dtype=dtype)
            agree = float((other.lm(ids).argmax(-1) == ref).float().mean())
            assert agree >= 0.97, f"dtype {dtype}: top-1 agreement {agree:.1%}"


def test_write_int8_rejects_a_missing_folder(tmp_path: Path) -> None:
    assert main([str(tmp_path / "nope"), str(tmp_path / "out")]) == 2


def test_a_grown_model_computes_what_the_trained_one_did(native_dir: Path, tmp_path: Path) -> None:
    cfg, _ = read_config(native_dir)
    state = load_state(native_dir)
    small = build_transformer(cfg, dict(state), native_dir).float()
    from dataclasses import replace

    deep_cfg = replace(cfg, num_hidden_layers=2 * cfg.num_hidden_layers)
    deep = build_transformer(deep_cfg, grow_depth(state, cfg.num_hidden_layers, deep_cfg.num_hidden_layers),
                             native_dir).float()
    ids = torch.tensor([list(range(3, 30))])
    with torch.no_grad():
        assert torch.allclose(small(ids), deep(ids), atol=1e-5)
    assert sum(p.numel() for p in deep.parameters()) > 1.5 * sum(p.numel() for p in small.parameters())


def test_int8_products_quantize_each_token_alone_so_a_row_never_depends_on_its_batch() -> None:
    torch.manual_seed(0)
    linear = torch.nn.Linear(64, 48, bias=False)
    layer = Int8Linear(linear.weight)
    small, large = torch.randn(3, 64), 1000 * torch.randn(2, 64)
    with torch.no_grad():
        alone, beside = layer(small), layer(torch.cat([small, large]))[:3]
        exact = linear(small)
    assert torch.equal(alone, beside), "a token with large activations must not coarsen the others"
    assert float((alone - exact).norm() / exact.norm()) < 0.02
    assert layer(torch.randn(2, 5, 64)).shape == (2, 5, 48)


def test_products_that_read_one_input_run_joined_and_give_the_separate_products_bit_for_bit(
        native_dir: Path) -> None:
    model = load_model(native_dir, device="cpu", dtype="int8")
    lm = model.lm
    attention, mlp = lm.model.layers[0].self_attn, lm.model.layers[0].mlp  # type: ignore[attr-defined]
    assert isinstance(attention.qkv_int8, Int8Linear) and isinstance(mlp.gate_up_int8, Int8Linear)
    assert attention.q_proj.qweight.data_ptr() == attention.qkv_int8.qweight.data_ptr(), "the parts are views: one copy"
    x = torch.randn(2, 7, attention.q_proj.in_features)
    with torch.no_grad():
        assert torch.equal(attention.qkv_int8(x), torch.cat([attention.q_proj(x), attention.k_proj(x),
                                                        attention.v_proj(x)], dim=-1))
        ids = torch.randint(0, 200, (2, 30))
        joined = lm(ids)
        for layer in lm.model.layers:  # type: ignore[attr-defined]
            layer.self_attn.qkv, layer.mlp.gate_up_int8 = None, None
        assert torch.equal(joined, lm(ids)), "joining the products changes no output bit"
    assert not [k for k in lm.state_dict() if "qkv" in k or "gate_up" in k], "state dicts keep the parts' names"


def test_the_cpu_default_on_x86_is_int8_products_with_fills_batched_as_alone(
        native_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("platform.machine", lambda: "x86_64")
    model = load_model(native_dir, device="cpu")
    assert model.int8 and model.dtype == torch.float32
    assert isinstance(model.lm.model.layers[0].self_attn.q_proj, Int8Linear)  # type: ignore[attr-defined]
    sampler = SamplerConfig(steps=4)
    requests = [FillRequest("__global__ void add(const float* a, float* c, int n) {\n    int i = ", ";\n}\n",
                            max_tokens=10, sampler=sampler),
                FillRequest("int x = ", "", max_tokens=10, sampler=sampler)]
    assert [r.texts for r in fill_batch(model, requests)] == [fill(model, r).texts for r in requests]
    assert load_model(native_dir, device="cpu", dtype="int8").int8
    assert not load_model(native_dir, device="cpu", dtype="float32").int8
    monkeypatch.setattr("platform.machine", lambda: "arm64")  # not measured there: floats, as before
    assert not load_model(native_dir, device="cpu").int8


def test_int8_is_refused_off_the_cpu_and_unknown_dtypes_name_the_choices() -> None:
    from dice_lsp.engine.device import resolve_dtype

    with pytest.raises(DiceError, match="int8 runs on the CPU only"):
        resolve_dtype(torch.device("cuda"), "int8")
    with pytest.raises(DiceError, match="use auto, float32, bfloat16, float16 or int8"):
        resolve_dtype(torch.device("cpu"), "fp8")
