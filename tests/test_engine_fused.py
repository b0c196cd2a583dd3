"""The static block step's fused weights and shared tables (`dice_lsp/engine/fused.py`), on a tiny random SDAR
checkpoint in fp32 on the CPU: fused products equal the separate ones, the separate weights become views
(same names, same values, no second copy, checkpoints unchanged), stale fusions are made again, and both
rotary forms equal the other paths' rotation."""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F

from dice_lsp.engine import load_model
from dice_lsp.engine.checkpoint import save_native, weights
from dice_lsp.engine.fused import ROPE_MATRIX_ROWS, StepTables, apply_rotary, rotation_matrices
from dice_lsp.engine.quant import int8_linears
from dice_lsp.engine.transformer import DecoderLayer, Transformer, rotary


def _fresh(sdar_dir: Path) -> Transformer:
    lm = load_model(sdar_dir, device="cpu", dtype="float32").lm
    assert isinstance(lm, Transformer)
    return lm


def _layer(lm: Transformer, i: int = 0) -> DecoderLayer:
    layer = lm.model.layers[i]
    assert isinstance(layer, DecoderLayer)
    return layer


def _step(lm: Transformer, ids: torch.Tensor) -> torch.Tensor:
    """The logits of the last block of `ids` by the static step over a fresh cache."""
    t = ids.shape[1]
    cache = lm.new_static_cache(ids.shape[0], -(-t // 4) * 4)
    return lm.static_forward(ids, torch.arange(t), cache, slice(t - 4, t))


def test_fused_products_equal_the_separate_ones_in_fp32(sdar_dir: Path) -> None:
    lm = _fresh(sdar_dir)
    x = torch.randn(3, 8, lm.config.hidden_size, generator=torch.Generator().manual_seed(1))
    for layer in (_layer(lm, 0), _layer(lm, 1)):
        attn, mlp = layer.self_attn, layer.mlp
        separate = (attn.q_proj(x), attn.k_proj(x), attn.v_proj(x), mlp.gate_proj(x), mlp.up_proj(x))
        fused = lm.static_weights()
        assert fused is not None and len(fused) == lm.config.num_hidden_layers
        qkv, _, gate_up = fused[0] if layer is _layer(lm, 0) else fused[1]
        q, k, v = torch.split(F.linear(x, qkv), [attn.q_proj.out_features, attn.k_proj.out_features,
                                                 attn.v_proj.out_features], dim=-1)
        gate, up = F.linear(x, gate_up).chunk(2, dim=-1)
        for one, other in zip((q, k, v, gate, up), separate, strict=True):
            assert one.shape == other.shape and one.abs().sum() > 0
            assert torch.allclose(one, other, rtol=0, atol=1e-6)


def test_the_separate_weights_become_views_and_checkpoints_are_unchanged(sdar_dir: Path, tmp_path: Path) -> None:
    lm = _fresh(sdar_dir)
    params = dict(lm.named_parameters())
    before = {k: v.clone() for k, v in weights(lm).items()}
    fused = lm.static_weights()
    assert fused is not None
    attn, mlp = _layer(lm).self_attn, _layer(lm).mlp
    assert dict(lm.named_parameters()).keys() == params.keys()
    assert all(p is params[name] for name, p in lm.named_parameters())  # the same Parameter objects
    qkv, _, gate_up = fused[0]
    base = qkv.untyped_storage().data_ptr()
    for w in (attn.q_proj.weight, attn.k_proj.weight, attn.v_proj.weight):
        assert w.untyped_storage().data_ptr() == base  # one buffer: the memory does not double
    assert qkv.untyped_storage().nbytes() == qkv.numel() * qkv.element_size()
    assert mlp.up_proj.weight.data_ptr() == gate_up.data_ptr() + mlp.gate_proj.weight.numel() * 4
    after = weights(lm)
    assert after.keys() == before.keys() and all(torch.equal(after[k], before[k]) for k in before)
    save_native(lm, load_model(sdar_dir, device="cpu").tokenizer, tmp_path / "saved")
    again = _fresh(tmp_path / "saved")
    assert all(torch.equal(a, b) for a, b in zip(again.state_dict().values(), lm.state_dict().values(), strict=True))
    with torch.no_grad():
        attn.q_proj.weight.mul_(2.0)  # an in-place update reaches the fused buffer (a view)
    assert torch.equal(qkv[:attn.q_proj.out_features], attn.q_proj.weight)


def test_stale_fusions_are_made_again_and_the_step_follows_the_weights(sdar_dir: Path) -> None:
    lm = _fresh(sdar_dir)
    ids = torch.randint(10, 300, (2, 12), generator=torch.Generator().manual_seed(2))
    assert torch.allclose(_step(lm, ids), lm(ids)[:, 8:12], atol=1e-5)
    first = lm.static_weights()
    assert first is not None
    lm.init_weights(std=0.3, generator=torch.Generator().manual_seed(3))  # in place: norms change version
    assert lm.static_weights()[0].qkv is first[0].qkv  # type: ignore[index]
    assert torch.allclose(_step(lm, ids), lm(ids)[:, 8:12], atol=1e-5)
    lm.to(torch.float64)  # every parameter replaced: the fusion is made again, in the new dtype
    refused = lm.static_weights()
    assert refused is not None and refused[0].qkv.dtype == torch.float64 and refused[0].qkv is not first[0].qkv
    assert torch.allclose(_step(lm, ids), lm(ids)[:, 8:12], atol=1e-10)
    lm.to(torch.float32)
    loss = lm(ids).logsumexp(-1).mean()  # still trainable after a static call under inference mode
    loss.backward()
    assert _layer(lm).self_attn.q_proj.weight.grad is not None


def test_int8_layers_run_the_static_step_unfused(sdar_dir: Path) -> None:
    lm = int8_linears(_fresh(sdar_dir))
    assert lm.static_weights() is None
    ids = torch.randint(10, 300, (1, 12), generator=torch.Generator().manual_seed(4))
    assert torch.allclose(_step(lm, ids), lm(ids)[:, 8:12], atol=1e-5)


def test_rotation_matrices_and_both_rotary_forms_equal_apply_rotary() -> None:
    dim, t, rows = 16, 6, 2
    cos, sin = rotary(torch.arange(100, 100 + t), dim, 10000.0)
    x = torch.randn(rows, t, 5, dim, generator=torch.Generator().manual_seed(5))
    expected = apply_rotary(x, cos[:, None, :], sin[:, None, :])
    assert torch.allclose(torch.ones(dim) @ rotation_matrices(cos, sin)[2],
                          apply_rotary(torch.ones(dim), cos[2], sin[2]), atol=1e-6)
    allowed = torch.ones(t, 8, dtype=torch.bool)
    allowed[:, 7] = False
    small = StepTables.make(allowed, cos, sin, rows)
    assert isinstance(small.rope, torch.Tensor) and small.rope.shape == (rows * t, dim, dim)
    assert small.mask[0].tolist() == [0.0] * 7 + [float("-inf")]
    assert torch.allclose(small.rotate(x), expected, atol=1e-6) and not torch.equal(expected, x)
    large = StepTables.make(allowed, cos, sin, ROPE_MATRIX_ROWS)  # rows x positions beyond the matrices
    assert isinstance(large.rope, tuple)
    assert torch.equal(large.rotate(x), expected)


def test_a_long_static_call_rotates_elementwise_and_equals_the_dynamic_path(sdar_dir: Path) -> None:
    lm = _fresh(sdar_dir)
    ids = torch.randint(10, 300, (3, 96), generator=torch.Generator().manual_seed(6))
    assert ROPE_MATRIX_ROWS < 3 * 96
    assert torch.allclose(_step(lm, ids), lm(ids)[:, 92:96], atol=1e-5)


def test_weights_made_in_inference_mode_fuse_too(sdar_dir: Path) -> None:
    with torch.inference_mode():
        lm = _fresh(sdar_dir)  # inference tensors: no version counters
        ids = torch.randint(10, 300, (1, 12), generator=torch.Generator().manual_seed(7))
        assert torch.allclose(_step(lm, ids), lm(ids)[:, 8:12], atol=1e-5)
