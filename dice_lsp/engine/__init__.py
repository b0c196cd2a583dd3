"""Diffusion runtime: checkpoints, the shared transformer, samplers and infilling. No editor code here."""

from dice_lsp.engine.checkpoint import EMBEDDED_MODEL, load_model, save_native
from dice_lsp.engine.infill import Draft, FillRequest, FillResult, answer, batch_key, fill, fill_batch
from dice_lsp.engine.model import DiffusionLM, LoadedModel
from dice_lsp.engine.sampling import SamplerConfig

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
    "fill",
    "fill_batch",
    "load_model",
    "save_native",
]
