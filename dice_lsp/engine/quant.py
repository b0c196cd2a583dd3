"""int8 weight storage for the embedded model, and int8 matrix products on the CPU.

Storage: every 2-D weight (the linear layers and the tied embedding) is kept as int8 with one float32 scale
per output row (symmetric: w ≈ q · scale, |q| ≤ 127), under the tensor's own name plus `SCALE_SUFFIX`;
norms stay as they are. That halves a bf16 checkpoint, so a model twice the size fits the package budget.

Compute: loading dequantizes to floats (GPU, bf16, fp32 as asked). On the CPU, when no dtype is asked, the
linear layers run as int8 products (`Int8Linear`): weights int8 per output row, each token's activations
quantized to int8 with its own scale on the way in, `torch._int_mm` accumulating in int32, both scales applied
on the way out; the embedding lookup, norms and attention stay in fp32. One scale per token, not one per call:
a token with large activations does not coarsen every other token's (with torch's per-call dynamic
quantization the shipped model's fills matched bf16's 1 time in 24, with per-token scales 7 in 24; fp32's
14 in 24; docs/PERFORMANCE.md). On the 2-core x86 CPUs measured a product is ~2x bf16's and ~4x fp32's speed.
Products that read the same activations run as one (`fuse_int8`: q|k|v, gate|up): the rows are quantized once
and one larger product replaces three or two; every output element is computed exactly as before.

`python -m dice_lsp.training.export SOURCE OUT` writes an int8 copy of a trained checkpoint folder.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import TypeVar

import torch
from torch import Tensor, nn

SCALE_SUFFIX = ".int8_scale"
M = TypeVar("M", bound=nn.Module)
SHARD_BYTES = 15 * 1024**2  # files small enough to travel back from a remote GPU machine


def is_quantized(state: dict[str, Tensor]) -> bool:
    return any(name.endswith(SCALE_SUFFIX) for name in state)


def quantize_state(state: dict[str, Tensor]) -> dict[str, Tensor]:
    """int8 rows + float32 row scales for every floating 2-D tensor; the rest unchanged."""
    out: dict[str, Tensor] = {}
    for name, tensor in state.items():
        if tensor.dim() != 2 or not tensor.is_floating_point():
            out[name] = tensor
            continue
        weight = tensor.float()
        scale = (weight.abs().amax(dim=1) / 127.0).clamp_min(1e-12)
        out[name] = torch.round(weight / scale[:, None]).clamp(-127, 127).to(torch.int8).contiguous()
        out[name + SCALE_SUFFIX] = scale.contiguous()
    return out


def dequantize_state(state: dict[str, Tensor]) -> dict[str, Tensor]:
    """Float32 tensors back from `quantize_state`'s output (others unchanged)."""
    out: dict[str, Tensor] = {}
    for name, tensor in state.items():
        if name.endswith(SCALE_SUFFIX):
            continue
        scale = state.get(name + SCALE_SUFFIX)
        out[name] = tensor if scale is None else tensor.float() * scale.float()[:, None]
    return out


class Int8Linear(nn.Module):
    """A bias-free linear layer as int8 products: int8 weights with one scale per output row, each input row
    (token) quantized to int8 with its own scale, int32 accumulation (`torch._int_mm`), fp32 out."""

    qweight: Tensor  # [out, in] int8
    scale: Tensor  # [out] float32

    def __init__(self, weight: Tensor) -> None:
        super().__init__()
        w = weight.detach().float()
        scale = (w.abs().amax(dim=1) / 127.0).clamp_min(1e-12)
        self.register_buffer("qweight", torch.round(w / scale[:, None]).clamp(-127, 127).to(torch.int8))
        self.register_buffer("scale", scale)
        self.in_features, self.out_features = int(w.shape[1]), int(w.shape[0])

    @classmethod
    def joined(cls, parts: Sequence[Int8Linear]) -> Int8Linear:
        """One layer whose output rows are `parts`' rows in order; the parts' buffers become views of its own
        (no second copy). Each output keeps its weight row's scale, and a token's scale depends only on the
        input, so the joined product equals the parts' outputs side by side, bit for bit."""
        fused = cls.__new__(cls)
        nn.Module.__init__(fused)
        # not persistent: the parts keep their names in state dicts, the joined layer is derived from them
        fused.register_buffer("qweight", torch.cat([p.qweight for p in parts]), persistent=False)
        fused.register_buffer("scale", torch.cat([p.scale for p in parts]), persistent=False)
        fused.in_features, fused.out_features = parts[0].in_features, int(fused.qweight.shape[0])
        row = 0
        for p in parts:
            p.qweight, p.scale = fused.qweight[row:row + p.out_features], fused.scale[row:row + p.out_features]
            row += p.out_features
        return fused

    def forward(self, x: Tensor) -> Tensor:
        rows = x.reshape(-1, self.in_features).float()
        step = (rows.abs().amax(dim=1, keepdim=True) / 127.0).clamp_min(1e-12)
        quantized = torch.round(rows / step).to(torch.int8)
        out = torch._int_mm(quantized, self.qweight.t()).float().mul_(step).mul_(self.scale)
        return out.reshape(*x.shape[:-1], self.out_features)


def int8_linears(model: M) -> M:
    """The model with its bias-free linear layers as `Int8Linear` int8 products (CPU), the rest in fp32, and
    the products that share an input joined (`fuse_int8`). Layers are quantized one at a time, so a bf16
    checkpoint never exists whole in fp32 on the way."""
    for module in list(model.modules()):
        for name, child in list(module.named_children()):
            if isinstance(child, nn.Linear) and child.bias is None:
                setattr(module, name, Int8Linear(child.weight))
    fuse_int8(model)
    return model.float()


JOINED = {"qkv_int8": ("q_proj", "k_proj", "v_proj"), "gate_up_int8": ("gate_proj", "up_proj")}


def fuse_int8(model: nn.Module) -> None:
    """Give every module whose `JOINED` parts are all `Int8Linear` a joined layer under the group's name
    (`Attention.qkv_int8`, `MLP.gate_up_int8`), which its forward uses instead of the parts."""
    for module in model.modules():
        for joined, names in JOINED.items():
            parts = [getattr(module, n, None) for n in names]
            if all(isinstance(p, Int8Linear) for p in parts):
                setattr(module, joined, Int8Linear.joined([p for p in parts if isinstance(p, Int8Linear)]))


def save_shards(tensors: dict[str, Tensor], out: Path) -> list[Path]:
    """Weights as safetensors files under SHARD_BYTES each (one file, or shards with an index)."""
    from safetensors.torch import save_file

    for old in [*out.glob("model*.safetensors"), *out.glob("model.safetensors.index.json")]:
        old.unlink()
    shards: list[dict[str, Tensor]] = [{}]
    size = 0
    for name in sorted(tensors):
        nbytes = tensors[name].numel() * tensors[name].element_size()
        if shards[-1] and size + nbytes > SHARD_BYTES:
            shards.append({})
            size = 0
        shards[-1][name] = tensors[name]
        size += nbytes
    if len(shards) == 1:
        save_file(shards[0], str(out / "model.safetensors"))
        return [out / "model.safetensors"]
    written: list[Path] = []
    weight_map: dict[str, str] = {}
    for index, shard in enumerate(shards):
        path = out / f"model-{index + 1:05d}-of-{len(shards):05d}.safetensors"
        save_file(shard, str(path))
        weight_map.update(dict.fromkeys(shard, path.name))
        written.append(path)
    (out / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}, indent=1))
    return written


def write_int8(source: Path, out: Path) -> list[Path]:
    """An int8 copy of a native checkpoint folder (config, tokenizer and weights in shards)."""
    from dice_lsp.engine.checkpoint import load_state

    state = quantize_state(load_state(source))
    out.mkdir(parents=True, exist_ok=True)
    written = save_shards(state, out)
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json", "train_log.json"):
        if (source / name).is_file() and source.resolve() != out.resolve():
            shutil.copyfile(source / name, out / name)
    return written
