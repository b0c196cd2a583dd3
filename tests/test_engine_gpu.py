"""The engine on a CUDA GPU: automatic device and dtype, both families, cache equivalence in bf16."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from dice_lsp.engine import FillRequest, SamplerConfig, fill, load_model
from dice_lsp.engine.sampling import Denoiser, generate_blocks

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
        return generate_blocks(model.lm, prompt, 2, 16, denoiser, set(), use_cache=use_cache)

    assert torch.equal(run(True), run(False))
