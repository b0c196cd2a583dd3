"""Diffusion runtime: checkpoints, the shared transformer, samplers and infilling. No editor code here.

The names below load on first use, so what needs only a plain value (`SamplerConfig` through
`dice_lsp.engine.sampler_config`, the settings, `dice-lsp --help`) never imports torch.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dice_lsp.engine.checkpoint import EMBEDDED_MODEL, load_model, save_native
    from dice_lsp.engine.fill_types import Draft, FillRequest, FillResult
    from dice_lsp.engine.infill import answer, batch_key, batch_rows, fill, fill_batch
    from dice_lsp.engine.model import DiffusionLM, LoadedModel
    from dice_lsp.engine.sampler_config import SamplerConfig

_HOMES = {
    "EMBEDDED_MODEL": "checkpoint", "load_model": "checkpoint", "save_native": "checkpoint",
    "Draft": "fill_types", "FillRequest": "fill_types", "FillResult": "fill_types",
    "answer": "infill", "batch_key": "infill", "batch_rows": "infill", "fill": "infill", "fill_batch": "infill",
    "DiffusionLM": "model", "LoadedModel": "model", "SamplerConfig": "sampler_config",
}

__all__ = [
    "EMBEDDED_MODEL",
    "DiffusionLM",
    "Draft",
    "FillRequest",
    "FillResult",
    "LoadedModel",
    "SamplerConfig",
    "answer",
    "batch_key",
    "batch_rows",
    "fill",
    "fill_batch",
    "load_model",
    "save_native",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value
