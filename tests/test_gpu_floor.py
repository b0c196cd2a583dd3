"""The floor of a GPU step (bench/engine_latency.py's `step_read_bytes`/`step_floor`, which
bench/static_step_replay.py uses too): the bytes a step must read, counted exactly on tiny CPU models (tied and
untied embeddings, bf16, fp32, int8) and on the benchmarked shapes built on the meta device. No timing."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch

from dice_lsp.engine.config import ModelConfig
from dice_lsp.engine.presets import DICE_TINY, SDAR_8B
from dice_lsp.engine.quant import int8_linears
from dice_lsp.engine.transformer import Transformer

BENCH = Path(__file__).resolve().parents[1] / "bench"


def _load() -> ModuleType:
    if "engine_latency" in sys.modules:
        return sys.modules["engine_latency"]
    spec = importlib.util.spec_from_file_location("engine_latency", BENCH / "engine_latency.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["engine_latency"] = module
    spec.loader.exec_module(module)
    return module


bench = _load()

V, H, FF, L, Q, KV, HD = 64, 16, 32, 2, 16, 8, 8  # vocab, hidden, intermediate, layers, q width, kv width, head dim


def tiny(tied: bool) -> ModelConfig:
    return ModelConfig(vocab_size=V, hidden_size=H, intermediate_size=FF, num_hidden_layers=L, num_attention_heads=2,
                       num_key_value_heads=1, head_dim=HD, max_position_embeddings=64, tie_word_embeddings=tied,
                       attention="block", model_type="sdar")


# Elements of one layer: q, k, v, o, gate, up, down, the two RMSNorms, q_norm and k_norm.
LAYER = H * Q + H * KV + H * KV + Q * H + H * FF + H * FF + FF * H + 2 * H + 2 * HD
TABLE = V * H
BODY = L * LAYER + H  # the layers and the final norm


def model(tied: bool, dtype: torch.dtype = torch.bfloat16) -> Transformer:
    torch.manual_seed(0)
    return Transformer(tiny(tied)).to(dtype).eval()


def test_untied_counts_every_weight_but_the_table_plus_the_rows_the_step_reads() -> None:
    counted = bench.step_read_bytes(model(tied=False), tokens=8)
    assert counted == {"weight_bytes": 2 * (TABLE + BODY + TABLE), "embedding_table_bytes": 2 * TABLE,
                       "embedding_tied": False, "step_tokens": 8, "embedding_rows_bytes": 2 * 8 * H,
                       "step_read_bytes": 2 * (BODY + TABLE) + 2 * 8 * H}
    assert counted["weight_bytes"] == 2 * tiny(False).num_parameters == 2 * 6768


def test_tied_counts_the_table_once_for_the_output_head_and_no_rows() -> None:
    counted = bench.step_read_bytes(model(tied=True), tokens=8)
    assert counted == {"weight_bytes": 2 * (TABLE + BODY), "embedding_table_bytes": 2 * TABLE,
                       "embedding_tied": True, "step_tokens": 8, "embedding_rows_bytes": 0,
                       "step_read_bytes": 2 * (TABLE + BODY)}
    assert counted["weight_bytes"] == 2 * tiny(True).num_parameters


def test_the_element_size_is_the_tensors_own() -> None:
    counted = bench.step_read_bytes(model(tied=False, dtype=torch.float32), tokens=3)
    assert counted["step_read_bytes"] == 4 * (BODY + TABLE) + 4 * 3 * H
    assert counted["weight_bytes"] == 4 * (2 * TABLE + BODY)


def test_int8_layers_count_their_int8_weights_and_scales_once_and_the_float_table_by_rows() -> None:
    lm = int8_linears(model(tied=True))  # the output head gets its own int8 copy: the table is no longer tied
    linear_rows = L * (Q + KV + KV + H + FF + FF + H) + V  # output rows of every linear layer, the head's included
    linear_elements = L * (H * Q + 2 * H * KV + Q * H + 2 * H * FF + FF * H) + V * H
    norms = L * (2 * H + 2 * HD) + H
    counted = bench.step_read_bytes(lm, tokens=8)
    assert counted["embedding_tied"] is False
    assert counted["weight_bytes"] == 4 * TABLE + linear_elements + 4 * linear_rows + 4 * norms
    assert counted["step_read_bytes"] == linear_elements + 4 * linear_rows + 4 * norms + 4 * 8 * H


def test_the_benchmarked_shapes_on_the_meta_device() -> None:
    with torch.device("meta"):
        sdar = Transformer(SDAR_8B).to(torch.bfloat16)
        dice = Transformer(DICE_TINY).to(torch.bfloat16)
    counted = bench.step_read_bytes(sdar, tokens=8)
    assert counted["weight_bytes"] == 16_381_470_720  # the logs' weight_bytes
    assert counted["embedding_table_bytes"] == 151_936 * 4096 * 2 == 1_244_659_712
    assert counted["step_read_bytes"] == 16_381_470_720 - 1_244_659_712 + 8 * 4096 * 2 == 15_136_876_544
    tied = bench.step_read_bytes(dice, tokens=8)
    assert tied["embedding_tied"] and tied["step_read_bytes"] == tied["weight_bytes"] == 2 * DICE_TINY.num_parameters


@pytest.mark.parametrize("tied", [False, True])
def test_a_hugging_face_model_is_counted_as_ours(tied: bool) -> None:
    transformers = pytest.importorskip("transformers")
    cfg = tiny(tied)
    hf = transformers.Qwen3ForCausalLM(transformers.Qwen3Config(
        vocab_size=V, hidden_size=H, intermediate_size=FF, num_hidden_layers=L, num_attention_heads=2,
        num_key_value_heads=1, head_dim=HD, max_position_embeddings=64, tie_word_embeddings=tied)).to(torch.bfloat16)
    assert bench.step_read_bytes(hf, tokens=8) == bench.step_read_bytes(model(tied), tokens=8)
    assert bench.step_read_bytes(hf, tokens=8)["weight_bytes"] == 2 * cfg.num_parameters


def test_step_floor_divides_the_read_bytes_by_the_read_bandwidth(monkeypatch: pytest.MonkeyPatch) -> None:
    reads = {"torch.sum float32": 3.0e12, "triton int32 blocks of 8192, 8 warps": 3.142e12}
    monkeypatch.setattr(bench, "measure_read_bandwidth", lambda device: (3.142e12, "triton", reads))
    monkeypatch.setattr(bench, "measure_copy_bandwidth", lambda device: 2.992e12)
    with torch.device("meta"):
        sdar = Transformer(SDAR_8B).to(torch.bfloat16)
    floor: dict[str, Any] = bench.step_floor(sdar, 8, torch.device("cpu"))
    assert floor["floor_ms_per_step"] == pytest.approx(15_136_876_544 / 3.142e12 * 1e3)  # 4.82 ms
    assert floor["copy_floor_ms"] == pytest.approx(16_381_470_720 / 2.992e12 * 1e3)  # 5.48 ms
    assert floor["read_bandwidth_GBps"] == pytest.approx(3142) and floor["copy_bandwidth_GBps"] == pytest.approx(2992)
    assert floor["read_bandwidth_GBps_by_method"]["torch.sum float32"] == pytest.approx(3000)
    assert floor["read_bandwidth_method"] == "triton"


def test_graph_targets_use_the_floor_given_and_report_the_legacy_ratio_beside_it() -> None:
    rows = [{"engine": f"{bench.ENGINE}, CUDA graph", "tokens_per_step": n, "ms_per_step": ms, "ms_per_token": ms / n}
            for n, ms in ((1, 6.0), (2, 6.5), (4, 7.0))]
    rows.append({"engine": "transformers generate (autoregressive)", "ms_per_token": 35.0})
    targets = bench.graph_targets(rows, 5.0, copy_floor_ms=5.6)
    assert targets == pytest.approx({"graph_step_over_floor": 1.4, "graph_step_over_copy_floor": 1.25,
                                     "graph_4_per_step_speedup_vs_generate": 20.0})


def _bench_module(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"_floor_test_{name}", BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_plots_tell_the_new_floor_from_the_legacy_one_in_what_the_benches_print() -> None:
    replay, plots = _bench_module("static_step_replay"), _bench_module("plots")
    measured = {"floor_ms_per_step": 4.8176, "step_read_bytes": 15_136_876_544, "embedding_rows_bytes": 65_536,
                "read_bandwidth_GBps": 3142.0, "read_bandwidth_method": "torch.sum float32",
                "read_bandwidth_GBps_by_method": {"torch.sum float32": 3142.0}, "copy_floor_ms": 5.475,
                "weight_bytes": 16_381_470_720, "copy_bandwidth_GBps": 2992.0}
    text = "replay ms, alternating: Triton step kernels and products 6.69 6.68 6.69\n" + replay.floor_lines(measured)
    assert plots.replay_times(text) == ({"Triton step kernels and products": 6.69}, 4.82)
    assert plots.floor_kind(text) == plots.FLOOR
    legacy = "floor: 5.46 ms per step (the weights read once at the copy bandwidth)\n"  # the logs before 2026-12-07
    assert plots.floor_kind(legacy) == plots.LEGACY_FLOOR
    assert plots.floor_kind({"meta": {"floor_ms_per_forward": 5.45}}) == plots.LEGACY_FLOOR
    assert plots.floor_kind({"meta": {"floor_ms_per_step": 4.82, "copy_floor_ms": 5.45}}) == plots.FLOOR
