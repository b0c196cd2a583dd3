"""Fixtures: tiny checkpoints of both families, built here from random weights (never from a hub)."""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_lsp
from pytest_lsp import LanguageClient

from . import scheduling
from .lsp_client import FAKE_MODEL_DIR, FAKE_SERVER, SERVER

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"


@pytest.fixture(autouse=True)
def no_kept_contexts() -> None:
    """Each test starts with no model's context keys kept from another test's fills (`engine.contexts`):
    tests that count model calls would otherwise find a fill asked before."""
    contexts = sys.modules.get("dice_lsp.engine.contexts")
    if contexts is not None:
        contexts.forget()


SPECIALS = ["<|pad|>", "<|eos|>", "<|mask|>", "<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"]
CUDA_SNIPPETS = [
    "__global__ void add(const float* a, const float* b, float* c, int n) {\n"
    "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < n) c[i] = a[i] + b[i];\n}\n",
    "__device__ float sq(float x) { return x * x; }\n",
    "template <int BLOCK>\n__global__ void reduce(const float* in, float* out) {\n"
    "    __shared__ float tile[BLOCK];\n    tile[threadIdx.x] = in[threadIdx.x];\n    __syncthreads();\n}\n",
    "add<<<(n + 255) / 256, 256>>>(a, b, c, n);\n#include <cuda_runtime.h>\n",
]


def write_tokenizer(folder: Path, mask_token: str = "<|mask|>", extra_specials: tuple[str, ...] = ()) -> int:
    """A byte-level BPE over a few CUDA lines; returns its vocabulary size."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    specials = [mask_token if t == "<|mask|>" else t for t in SPECIALS] + list(extra_specials)
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(CUDA_SNIPPETS * 4, trainer)
    folder.mkdir(parents=True, exist_ok=True)
    tok.save(str(folder / "tokenizer.json"))
    config = {"mask_token": mask_token, "pad_token": "<|pad|>", "eos_token": "<|eos|>"}
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    return int(tok.get_vocab_size())


def edit_config(folder: Path, tmp_path: Path, **changes: object) -> Path:
    """A copy of the checkpoint `folder` with its config.json changed (a None value removes the key)."""
    copy = tmp_path / "broken"
    shutil.copytree(folder, copy)
    config = json.loads((copy / "config.json").read_text())
    for key, value in changes.items():
        if value is None:
            config.pop(key)
        else:
            config[key] = value
    (copy / "config.json").write_text(json.dumps(config))
    return copy


def tiny_config(vocab_size: int, **overrides: object) -> dict[str, object]:
    config: dict[str, object] = {
        "vocab_size": vocab_size, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "max_position_embeddings": 256,
        "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
    }
    config.update(overrides)
    return config


@pytest.fixture(scope="session")
def native_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import torch

    from dice_lsp.engine.checkpoint import save_native
    from dice_lsp.engine.config import ModelConfig
    from dice_lsp.engine.tokenizer import Tokenizer
    from dice_lsp.engine.transformer import Transformer

    folder = tmp_path_factory.mktemp("native")
    vocab = write_tokenizer(folder)
    model = Transformer(ModelConfig(**tiny_config(vocab), model_type="dice"))  # type: ignore[arg-type]
    model.init_weights(std=0.2, generator=torch.Generator().manual_seed(0))
    save_native(model, Tokenizer(folder), folder)
    return folder


def write_qwen3_folder(folder: Path, model_type: str, block_size: int = 4) -> Path:
    """A Qwen3 checkpoint saved by transformers itself, relabelled as an SDAR folder."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    vocab = write_tokenizer(folder, mask_token="<|MASK|>")
    torch.manual_seed(0)
    model = Qwen3ForCausalLM(Qwen3Config(**tiny_config(vocab), tie_word_embeddings=False))
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.2) if p.dim() > 1 else p.uniform_(0.5, 1.5)
    model.save_pretrained(str(folder))
    config = json.loads((folder / "config.json").read_text())
    config.update(model_type=model_type, block_size=block_size)
    (folder / "config.json").write_text(json.dumps(config))
    return folder


@pytest.fixture(scope="session")
def sdar_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_qwen3_folder(tmp_path_factory.mktemp("sdar"), "sdar")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--store-durations", action="store_true",
                     help="write each test's time (setup, call and teardown) to tests/durations.json, the order "
                          "the suite's tests start in (tests/scheduling.py)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    import torch

    scheduling.order(items, scheduling.read_durations())
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (none on this machine)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


MEASURED: dict[str, float] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    MEASURED[report.nodeid] = MEASURED.get(report.nodeid, 0.0) + report.duration


def pytest_sessionfinish(session: pytest.Session) -> None:
    config = session.config
    if config.getoption("store_durations") and not hasattr(config, "workerinput") and MEASURED:
        whole = (config.args_source == pytest.Config.ArgsSource.TESTPATHS and not config.option.keyword
                 and not config.option.markexpr)
        scheduling.write_durations(MEASURED, whole_suite=whole)


@pytest_lsp.fixture(config=FAKE_SERVER)
async def fake_client(lsp_client: LanguageClient) -> AsyncIterator[None]:
    """A real LSP client connected to a fresh `dice-lsp` whose model writes what the test says (`fake_fills`)."""
    for stale in FAKE_MODEL_DIR.iterdir():
        stale.unlink()
    yield
    await lsp_client.shutdown_session()


@pytest_lsp.fixture(config=SERVER)
async def client(lsp_client: LanguageClient) -> AsyncIterator[None]:
    """A real LSP client connected to a fresh `dice-lsp` process; each test initializes it itself."""
    yield
    await lsp_client.shutdown_session()
