"""Fused weights and shared tables of the static block step (`Transformer.static_forward`), the call that
`block_graph.py` captures as a CUDA graph: fewer, larger kernels for the same arithmetic.

- **Fused products.** q|k|v and gate|up each run as one matrix product over one weight made by stacking
  the separate weights' rows (`fuse_rows`). The separate `nn.Linear` weights then become views of that
  buffer (their `Parameter` objects, names and values unchanged), so memory does not double, the other
  paths and checkpoint saving see the same named tensors, and in-place updates reach both. A weight that
  stops being a view (moved by `Module.to`, replaced by `load_state_dict(assign=True)`) is seen at the next
  static call, which fuses again; layers that are not plain bias-free `nn.Linear`s (int8) are not fused.
- **q and k together.** One normalisation of the q|k heads of the fused output (`norm_heads`, with a
  per-head weight table; `head_norm_table`) and one rotation of them (`rotate`): a batched product with a
  [dim, dim] rotation matrix per (row, position) for window-sized calls (`StepTables.rope`), the elementwise
  form for long calls, where the matrices would take rows x positions x dim^2 elements.
- **One mask** per call, additive, in the model's dtype, instead of a boolean mask that attention converts
  in every layer.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from dice_lsp.engine import step_kernels

ROPE_MATRIX_ROWS = 256  # rows x positions up to which a static call rotates q and k by matrix products
FUSE_LOCK = threading.Lock()  # steppers of one model may be made (and fuse) from several threads


class LayerWeights(NamedTuple):
    """The fused tensors one layer's static step reads (a captured graph reads their addresses)."""

    qkv: Tensor  # [(q heads + 2 * kv heads) * head dim, hidden]
    qk_norm: Tensor  # [q heads + kv heads, head dim]: q_norm's weight for each q head, then k_norm's
    gate_up: Tensor  # [2 * intermediate, hidden]


def _views_of(fused: Tensor, weights: Sequence[Tensor]) -> bool:
    """Whether `weights` are still the consecutive row blocks of `fused`."""
    offset = fused.data_ptr()
    for w in weights:
        if w.device != fused.device or w.dtype != fused.dtype or w.data_ptr() != offset:
            return False
        offset += w.numel() * w.element_size()
    return True


def fuse_rows(linears: Sequence[nn.Module], fused: Tensor | None) -> Tensor | None:
    """One weight [sum of outputs, inputs] with the rows of `linears`' weights, which become its views.

    Returns `fused` itself while the weights are still its views; None when a layer is not a plain
    bias-free `nn.Linear` (the dynamically quantized int8 layers), which then runs unfused.
    """
    weights: list[Tensor] = []
    for m in linears:
        if type(m) is not nn.Linear or m.bias is not None:
            return None
        weights.append(m.weight)
    if fused is not None and _views_of(fused, weights):
        return fused
    # the kind of tensor the weights are: ordinary ones stay usable in training after a call in inference mode
    with torch.inference_mode(weights[0].is_inference()), torch.no_grad():
        fused = torch.cat([w.detach() for w in weights])
    row = 0
    for w in weights:
        w.data = fused[row:row + w.shape[0]]  # the same Parameter, now a view: no second copy
        row += w.shape[0]
    return fused


class NormTable(NamedTuple):
    """A per-head weight table and the (address, version) of the two weights it was made from."""

    key: tuple[int, int, int, int]
    table: Tensor


def _version(t: Tensor) -> int:
    """The in-place version counter of `t` (-1 for an inference tensor, which has none and cannot change)."""
    return -1 if t.is_inference() else t._version


def head_norm_table(q_weight: Tensor, k_weight: Tensor, q_heads: int, kv_heads: int,
                    made: NormTable | None) -> NormTable:
    """[q_heads + kv_heads, head dim]: the q norm's weight for each q head, then the k norm's (a copy, made
    again when either weight was replaced or changed in place since: its version counter moved)."""
    key = (q_weight.data_ptr(), _version(q_weight), k_weight.data_ptr(), _version(k_weight))
    if made is not None and made.key == key:
        return made
    with torch.inference_mode(q_weight.is_inference()), torch.no_grad():
        table = torch.cat((q_weight.detach().expand(q_heads, -1), k_weight.detach().expand(kv_heads, -1)))
    return NormTable(key, table)


def norm_heads(x: Tensor, table: Tensor, eps: float, fused: bool) -> Tensor:
    """RMS-normalise each head of `x` ([..., heads, head dim]) and weigh it by its row of `table`.

    `fused` (CUDA): `F.rms_norm` without weight, then the weight, in two kernels; otherwise the
    arithmetic of the other paths' `RMSNorm`, op for op. Both round to the dtype before the weight.
    """
    if fused:
        normalised = F.rms_norm(x, (x.shape[-1],), None, eps)
    else:
        x32 = x.float()
        normalised = (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)
    return table * normalised


def rotation_matrices(cos: Tensor, sin: Tensor) -> Tensor:
    """[T, dim, dim] matrices R with `x @ R[t] == apply_rotary(x, cos[t], sin[t])` (each entry is one of
    ±cos, ±sin or 0, exactly: the rotation applied to the rows of the identity)."""
    half = cos.shape[-1] // 2
    eye = torch.eye(cos.shape[-1], dtype=cos.dtype, device=cos.device)
    rotated = torch.cat((-eye[:, half:], eye[:, :half]), dim=-1)
    return eye * cos[:, None, :] + rotated * sin[:, None, :]


def apply_rotary(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return (x * cos.to(x.dtype)) + (rotated * sin.to(x.dtype))


@dataclass(frozen=True)
class StepTables:
    """What every layer of one static call shares."""

    mask: Tensor  # [T, keys] ([rows, 1, T, keys]: padded rows, positions per row) additive: 0 where the query
    # may see the key, else -inf
    rope: Tensor | tuple[Tensor, Tensor]  # [rows * T, dim, dim] rotations, or cos/sin [T, 1, dim] ([rows, T, 1, dim])
    fused_norms: bool = False  # RMSNorms as `F.rms_norm` (CUDA: one kernel instead of eight)
    heads: tuple[Tensor, Tensor] | None = None  # cos/sin [T or rows * T, dim] where `step_kernels.norm_rotate`
    # rotates instead

    @classmethod
    def make(cls, allowed: Tensor, cos: Tensor, sin: Tensor, rows: int, fused_norms: bool = False) -> StepTables:
        """From the boolean mask and the cos/sin tables ([T, dim], or [rows, T, dim] where each row has its own
        positions; the model's dtype) of a call."""
        mask = torch.zeros(allowed.shape, dtype=cos.dtype, device=cos.device).masked_fill_(~allowed, float("-inf"))
        per_token = (cos.reshape(-1, cos.shape[-1]), sin.reshape(-1, sin.shape[-1]))  # [T or rows * T, dim]
        if step_kernels.elementwise_usable(cos):  # one Triton kernel normalises and rotates the q|k heads
            return cls(mask, (cos.unsqueeze(-2), sin.unsqueeze(-2)), fused_norms, per_token)
        if rows * cos.shape[-2] <= ROPE_MATRIX_ROWS:
            matrices = rotation_matrices(*per_token)
            return cls(mask, matrices if cos.dim() == 3 else matrices.repeat(rows, 1, 1), fused_norms)
        return cls(mask, (cos.unsqueeze(-2), sin.unsqueeze(-2)), fused_norms)

    def rotate(self, x: Tensor) -> Tensor:
        """Rotary embedding of `x` ([rows, T, heads, dim], contiguous) at the call's positions."""
        if isinstance(self.rope, Tensor):
            b, t, h, d = x.shape
            return torch.bmm(x.reshape(b * t, h, d), self.rope).view(b, t, h, d)
        return apply_rotary(x, *self.rope)
