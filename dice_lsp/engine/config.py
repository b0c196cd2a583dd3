"""Model configuration shared by both checkpoint families.

The embedded `dice-tiny` model and SDAR/DICE checkpoints are both Qwen3-shaped transformers; they differ
only in how attention is laid out (fully bidirectional vs. block-causal). A native checkpoint may also be
`causal`: an autoregressive fill-in-the-middle model of the same shape, the baseline the diffusion model
is measured against. One dataclass describes both,
read from the `config.json` of a checkpoint folder with clear errors for anything missing or wrong.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, Literal

from dice_lsp.errors import ModelLoadError

AttentionLayout = Literal["bidirectional", "block", "causal"]

NATIVE_MODEL_TYPE = "dice"
BLOCK_MODEL_TYPES = ("sdar", "qwen3")
SDAR_DEFAULT_BLOCK_SIZE = 4


@dataclass(frozen=True)
class ModelConfig:
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    max_position_embeddings: int
    rms_norm_eps: float = 1e-6
    rope_theta: float = 1_000_000.0
    tie_word_embeddings: bool = False
    attention: AttentionLayout = "bidirectional"
    block_size: int = SDAR_DEFAULT_BLOCK_SIZE
    model_type: str = NATIVE_MODEL_TYPE

    def __post_init__(self) -> None:
        for name in ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                     "num_attention_heads", "num_key_value_heads", "head_dim",
                     "max_position_embeddings", "block_size"):
            if getattr(self, name) <= 0:
                raise ModelLoadError(f"config.json: {name} must be a positive integer")
        if self.num_attention_heads % self.num_key_value_heads:
            raise ModelLoadError("config.json: num_attention_heads must be a multiple of num_key_value_heads")
        if self.head_dim % 2:
            raise ModelLoadError("config.json: head_dim must be even (rotary embeddings)")
        if self.attention not in ("bidirectional", "block", "causal"):
            raise ModelLoadError(f"config.json: unknown attention layout {self.attention!r}")

    @property
    def num_parameters(self) -> int:
        h, i, hd = self.hidden_size, self.intermediate_size, self.head_dim
        q, kv = self.num_attention_heads * hd, self.num_key_value_heads * hd
        layer = h * (q + 2 * kv) + q * h + 3 * h * i + 2 * h + 2 * hd
        head = 0 if self.tie_word_embeddings else self.vocab_size * h
        return self.vocab_size * h + self.num_hidden_layers * layer + h + head

    def to_json(self) -> dict[str, Any]:
        """The config.json content for a native checkpoint (Hugging Face field names)."""
        data = asdict(self)
        data["architectures"] = ["DiceMaskedDiffusionLM"]
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ModelConfig:
        model_type = data.get("model_type")
        if model_type == NATIVE_MODEL_TYPE:
            attention: AttentionLayout = data.get("attention", "bidirectional")
        elif model_type in BLOCK_MODEL_TYPES:
            attention = "block"
        else:
            known = ", ".join((NATIVE_MODEL_TYPE, *BLOCK_MODEL_TYPES))
            raise ModelLoadError(f"config.json: model_type {model_type!r} is not supported (known: {known})")
        values: dict[str, Any] = {"attention": attention, "model_type": model_type}
        required = {"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                    "num_attention_heads", "max_position_embeddings"}
        missing = sorted(required - data.keys())
        if missing:
            raise ModelLoadError(f"config.json: missing {', '.join(missing)}")
        for f in fields(cls):
            if f.name in data and f.name not in values:
                values[f.name] = data[f.name]
        values.setdefault("num_key_value_heads", data["num_attention_heads"])
        values.setdefault("head_dim", data["hidden_size"] // data["num_attention_heads"])
        if "rope_theta" not in data and isinstance(data.get("rope_parameters"), dict):
            values["rope_theta"] = data["rope_parameters"].get("rope_theta", cls.rope_theta)
        try:
            return cls(**values)
        except TypeError as exc:
            raise ModelLoadError(f"config.json: {exc}") from exc


def read_config(folder: Path) -> tuple[ModelConfig, dict[str, Any]]:
    """Parse `folder/config.json`; returns the typed config and the raw dict."""
    path = folder / "config.json"
    if not path.is_file():
        raise ModelLoadError(f"{folder}: not a model folder (no config.json)")
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ModelLoadError(f"{path}: invalid JSON ({exc})") from exc
    if not isinstance(raw, dict):
        raise ModelLoadError(f"{path}: expected a JSON object")
    return ModelConfig.from_json(raw), raw
