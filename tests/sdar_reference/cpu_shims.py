"""What the official SDAR files need to run on a CPU, without editing them.

`modeling_sdar.py` imports `flash_attn` (a CUDA-only package) for two things used at inference: the fused
RMSNorm and, while a block is being decoded with every key visible, `flash_attn_func`. It also imports a
training-only fused loss from a sibling module the published folder does not carry, and uses relative
imports, so it must be imported as part of a package. `install` puts plain-torch stand-ins for those
modules into `sys.modules` and registers the folder of the official files as a package; `greedy` is the
deterministic stand-in for `generate.py`'s `torch.multinomial` sampler.

Runs in the separate environment of the parity test (.venv-sdar: torch, einops, transformers 4.52.4).
"""

from __future__ import annotations

import sys
import types
from importlib.machinery import ModuleSpec
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

PACKAGE = "sdar_official"


def rms_norm_fn(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None, residual: Any = None,
                eps: float = 1e-6, **_: Any) -> torch.Tensor:
    """flash_attn.ops.triton.layer_norm.rms_norm_fn without a residual: normalise in fp32, scale, cast back."""
    if residual is not None:
        raise NotImplementedError("the CPU stand-in of rms_norm_fn takes no residual")
    x32 = x.float()
    y = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps) * weight.float()
    if bias is not None:
        y = y + bias.float()
    return y.to(x.dtype)


def flash_attn_func(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, dropout_p: float = 0.0,
                    softmax_scale: float | None = None, causal: bool = False, **_: Any) -> torch.Tensor:
    """flash_attn_func on `b l h d` tensors; grouped-query attention by repeating each key/value head."""
    if dropout_p:
        raise NotImplementedError("the CPU stand-in of flash_attn_func has no dropout")
    groups = q.shape[2] // k.shape[2]
    k, v = k.repeat_interleave(groups, dim=2), v.repeat_interleave(groups, dim=2)
    out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                         is_causal=causal, scale=softmax_scale)
    return out.transpose(1, 2)


def _training_only(*_: Any, **__: Any) -> Any:
    raise NotImplementedError("training-only flash_attn function; not needed to decode")


class FusedLinearDiffusionCrossEntropyLoss:
    """Stand-in for the training-only fused loss module (never called while decoding)."""


def _module(name: str, **attrs: Any) -> types.ModuleType:
    module = types.ModuleType(name)
    # a spec, so that transformers' probe (importlib.util.find_spec) works; with no installed distribution
    # behind it, transformers still reports flash attention as unavailable
    module.__spec__ = ModuleSpec(name, None)
    module.__dict__.update(attrs)
    sys.modules[name] = module
    return module


def install(folder: Path) -> None:
    """Stand-ins into sys.modules; `folder` (the official files) becomes the package `sdar_official`."""
    _module("flash_attn", flash_attn_func=flash_attn_func, flash_attn_varlen_func=_training_only)
    _module("flash_attn.bert_padding", index_first_axis=_training_only, pad_input=_training_only,
            unpad_input=_training_only)
    _module("flash_attn.ops")
    _module("flash_attn.ops.triton")
    _module("flash_attn.ops.triton.layer_norm", rms_norm_fn=rms_norm_fn)
    package = _module(PACKAGE)
    package.__path__ = [str(folder)]
    _module(f"{PACKAGE}.fused_linear_diffusion_cross_entropy",
            FusedLinearDiffusionCrossEntropyLoss=FusedLinearDiffusionCrossEntropyLoss)


def greedy(logits: torch.Tensor, temperature: float = 1.0, top_k: int = 0,
           top_p: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """`sample_with_temperature_topk_topp` made greedy: the argmax token and its softmax probability."""
    if temperature != 1.0 or top_k or top_p != 1.0:
        raise ValueError("the greedy stand-in takes the official defaults only (temperature 1, no top-k/top-p)")
    probs = F.softmax(logits, dim=-1)
    token_prob, token = probs.max(dim=-1)
    return token, token_prob
