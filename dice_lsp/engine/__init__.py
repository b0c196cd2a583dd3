"""Diffusion runtime: checkpoints, the shared transformer, samplers and infilling. No editor code here."""

from dice_lsp.engine.checkpoint import EMBEDDED_MODEL, load_model, save_native
from dice_lsp.engine.infill import FillRequest, FillResult, fill
from dice_lsp.engine.model import DiffusionLM, LoadedModel
from dice_lsp.engine.sampling import SamplerConfig

__all__ = [
    "EMBEDDED_MODEL",
    "DiffusionLM",
    "FillRequest",
    "FillResult",
    "LoadedModel",
    "SamplerConfig",
    "fill",
    "load_model",
    "save_native",
]
