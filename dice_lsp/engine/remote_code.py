"""SDAR/DICE folders that carry their own modeling files, run through transformers (`trust_remote_code`).

The family's own code may use fused kernels or layouts our transformer does not know; we drive it with
the same block-causal 4D mask and positions as our own implementation and keep a transformers
`DynamicCache`, cropping again the newest positions that must not be kept.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from dice_lsp.engine.config import ModelConfig
from dice_lsp.engine.transformer import block_causal_mask
from dice_lsp.errors import ModelLoadError


class RemoteCodeLM:
    def __init__(self, folder: Path, config: ModelConfig, device: torch.device, dtype: torch.dtype) -> None:
        from transformers import AutoModelForCausalLM

        self.config = config
        try:
            model: Any = AutoModelForCausalLM.from_pretrained(
                str(folder), trust_remote_code=True, dtype=dtype, local_files_only=True
            )
        except Exception as exc:
            raise ModelLoadError(f"{folder}: its modeling code failed to load ({exc})") from exc
        self.model = model.to(device=device).eval()

    def new_cache(self) -> Any:
        from transformers import DynamicCache

        return DynamicCache()

    def __call__(self, ids: Tensor, start: int = 0, cache: Any = None, keep: int = 0,
                 only: slice | None = None, valid_keys: Tensor | None = None) -> Tensor:
        t = ids.shape[1]
        allowed = block_causal_mask(start, t, self.config.block_size, ids.device)
        if allowed is None:
            allowed = torch.ones(t, start + t, dtype=torch.bool, device=ids.device)
        positions = torch.arange(start, start + t, device=ids.device)[None, :].expand(ids.shape[0], -1)
        masks = allowed[None, None].expand(ids.shape[0], 1, -1, -1)
        if valid_keys is not None:
            masks = masks & valid_keys[:, None, None, :]
        out = self.model(
            input_ids=ids,
            attention_mask=masks,
            position_ids=positions,
            past_key_values=cache,
            use_cache=cache is not None,
        )
        if cache is not None and keep < t:
            cache.crop(keep - t)  # a negative length drops the newest positions in every transformers release
        logits: Tensor = out.logits
        return logits if only is None else logits[:, only]
