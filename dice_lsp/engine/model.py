"""The one model interface the samplers talk to, whatever the checkpoint family."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import torch
from torch import Tensor

from dice_lsp.engine.config import AttentionLayout, ModelConfig
from dice_lsp.engine.tokenizer import SpecialTokens, Tokenizer


class DiffusionLM(Protocol):
    """Token ids and block layout in, logits out.

    `attention` says how positions see each other: `bidirectional` models fill a masked region in place,
    `block` models (SDAR/DICE) see later blocks not at all and generate block by block with a cache.
    """

    config: ModelConfig

    def new_cache(self) -> Any: ...

    def __call__(self, ids: Tensor, start: int = 0, cache: Any = None, keep: int = 0,
                 only: slice | None = None, valid_keys: Tensor | None = None) -> Tensor: ...


@dataclass
class LoadedModel:
    lm: DiffusionLM
    tokenizer: Tokenizer
    name: str
    path: Path
    device: torch.device
    dtype: torch.dtype
    int8: bool = False  # linear layers run as int8 products (an int8 checkpoint on the CPU)

    @property
    def special(self) -> SpecialTokens:
        return self.tokenizer.special

    @property
    def attention(self) -> AttentionLayout:
        return self.lm.config.attention

    @property
    def window(self) -> int:
        return self.lm.config.max_position_embeddings
