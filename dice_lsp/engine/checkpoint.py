"""Load and save checkpoint folders (config.json + safetensors + tokenizer).

Native `dice` folders and SDAR/Qwen3 folders share parameter names, so one loader reads both; sharded
checkpoints (`model.safetensors.index.json`) are read shard by shard. Folders that carry their own
modeling code are loaded through transformers when the user opts in with `trust_remote_code`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from dice_lsp.engine.config import ModelConfig, read_config
from dice_lsp.engine.device import int8_products, resolve_device, resolve_dtype, use_cpu_threads
from dice_lsp.engine.model import LoadedModel
from dice_lsp.engine.quant import dequantize_state, int8_linears, is_quantized
from dice_lsp.engine.tokenizer import Tokenizer
from dice_lsp.engine.transformer import Transformer
from dice_lsp.errors import ModelLoadError

EMBEDDED_MODEL = Path(__file__).resolve().parent.parent / "models" / "dice-tiny"


def _weight_files(folder: Path) -> list[Path]:
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        weight_map = json.loads(index.read_text(encoding="utf-8")).get("weight_map", {})
        return [folder / name for name in sorted(set(weight_map.values()))]
    single = folder / "model.safetensors"
    if single.is_file():
        return [single]
    raise ModelLoadError(f"{folder}: no model.safetensors or model.safetensors.index.json")


def load_state(folder: Path) -> dict[str, torch.Tensor]:
    state: dict[str, torch.Tensor] = {}
    for path in _weight_files(folder):
        if not path.is_file():
            raise ModelLoadError(f"{folder}: missing weight shard {path.name}")
        try:
            state.update(load_file(str(path), device="cpu"))
        except Exception as exc:
            raise ModelLoadError(f"{path}: unreadable safetensors ({exc})") from exc
    return state


_INITS = ("normal_", "uniform_", "trunc_normal_", "kaiming_uniform_", "kaiming_normal_", "xavier_uniform_",
          "xavier_normal_", "zeros_", "ones_", "constant_")


@contextmanager
def _placeholders() -> Iterator[None]:
    """Modules built here get parameters on the meta device and skip their random initialisation (the
    checkpoint's tensors replace them): initialising meta tensors runs torch's Python reference kernels, whose
    first use imports ~1 s of modules, paid by every model load (a CLI completion, a server start)."""
    saved = {name: getattr(torch.nn.init, name) for name in _INITS}
    for name in _INITS:
        setattr(torch.nn.init, name, lambda tensor, *args, **kwargs: tensor)
    try:
        with torch.device("meta"):
            yield
    finally:
        for name, function in saved.items():
            setattr(torch.nn.init, name, function)


def build_transformer(cfg: ModelConfig, state: dict[str, torch.Tensor], folder: Path) -> Transformer:
    """Instantiate without allocating, then adopt the checkpoint's tensors; shape errors name the tensor."""
    with _placeholders():
        model = Transformer(cfg)
    if cfg.tie_word_embeddings:
        state.pop("lm_head.weight", None)
    expected = {name: p.shape for name, p in model.named_parameters()}
    missing = sorted(set(expected) - set(state))
    if missing:
        raise ModelLoadError(f"{folder}: weights missing for {missing[0]} (and {len(missing) - 1} more)")
    for name, shape in expected.items():
        if state[name].shape != shape:
            raise ModelLoadError(
                f"{folder}: {name} has shape {tuple(state[name].shape)} but config.json implies {tuple(shape)}"
            )
    model.load_state_dict({k: state[k] for k in expected}, assign=True, strict=False)
    if cfg.tie_word_embeddings:
        model.lm_head.weight = model.model.embed_tokens.weight
    return model.eval()


def has_remote_code(folder: Path) -> bool:
    return any(folder.glob("modeling_*.py"))


def load_model(path: Path | str | None = None, device: str | None = None, dtype: str | None = None,
               trust_remote_code: bool = False) -> LoadedModel:
    """Load a checkpoint folder (default: the embedded dice-tiny) onto the chosen device."""
    folder = Path(path).expanduser() if path is not None else EMBEDDED_MODEL
    if not folder.is_dir():
        raise ModelLoadError(f"{folder}: model folder not found")
    cfg, raw = read_config(folder)
    tokenizer = Tokenizer(folder)
    torch_device = resolve_device(device)
    torch_dtype = resolve_dtype(torch_device, dtype)
    if torch_device.type == "cpu":
        use_cpu_threads()
    if trust_remote_code and has_remote_code(folder):
        from dice_lsp.engine.remote_code import RemoteCodeLM

        lm = RemoteCodeLM(folder, cfg, torch_device, torch_dtype)
        return LoadedModel(lm, tokenizer, folder.name, folder, torch_device, torch_dtype)
    if tokenizer.vocab_size > cfg.vocab_size:
        raise ModelLoadError(f"{folder}: tokenizer has {tokenizer.vocab_size} tokens, model only {cfg.vocab_size}")
    state = load_state(folder)
    int8 = is_quantized(state)
    model = build_transformer(cfg, dequantize_state(state) if int8 else state, folder)
    name = str(raw.get("name_or_path") or raw.get("_name_or_path") or folder.name)
    if int8_products(torch_device, dtype) or (int8 and torch_device.type == "cpu" and dtype in (None, "", "auto")):
        # int8 matrix products on the CPU (`device.int8_products`; an int8 checkpoint uses them on any CPU)
        return LoadedModel(int8_linears(model), tokenizer, Path(name).name or folder.name, folder, torch_device,
                           torch.float32, int8=True)
    model = model.to(device=torch_device, dtype=torch_dtype)
    return LoadedModel(model, tokenizer, Path(name).name or folder.name, folder, torch_device, torch_dtype)


def weights(model: Transformer, dtype: torch.dtype | None = None) -> dict[str, torch.Tensor]:
    """The tensors a native checkpoint stores: tied output weights only once, as the embedding."""
    return {k: (v if dtype is None else v.to(dtype)).detach().contiguous().cpu()
            for k, v in model.state_dict().items()
            if not (model.config.tie_word_embeddings and k == "lm_head.weight")}


def save_native(model: Transformer, tokenizer: Tokenizer, folder: Path) -> None:
    """Write a native checkpoint folder that `load_model` reads back."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(model.config.to_json(), indent=2) + "\n", encoding="utf-8")
    save_file(weights(model), str(folder / "model.safetensors"))
    tokenizer.save(folder)
