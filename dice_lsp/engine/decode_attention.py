"""Attention for a static step's few queries on a GPU: one Triton kernel instead of cuDNN's.

A block step (8 queries per row over a 768-key cache at SDAR-8B's shape) spends ~20 µs per layer in
`F.scaled_dot_product_attention`, most of it fixed cost: its work is ~0.4 MB of keys and values per kv
head. Here one program runs per (row, kv head, group of query heads): it loads its query heads' queries once
([heads x T, head dim], the heads that share the kv head side by side, so keys and values are read once for
all of them), walks the keys in blocks with an online softmax (fp32 running max and sum), adds the call's
additive mask and writes the output. Same arithmetic as attention with an additive mask, other rounding.

Used by the static step on CUDA in fp16/bf16 (`usable`); every other path, and fp32, keeps
`F.scaled_dot_product_attention`. Without Triton (the CPU-only install) the module imports and says no.
"""

from __future__ import annotations

import logging
from functools import cache
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

try:
    import triton
    import triton.language as tl
except ImportError:  # the CPU-only install: torch's CPU wheel brings no Triton
    triton = None
    tl = None

ENABLED = False  # the static step's attention here where `usable`: off until measured on a GPU
LOG = logging.getLogger("dice_lsp.engine")
MAX_QUERY_ROWS = 128  # query heads sharing a kv head x queries per row, at most (one program's tile)
BLOCK_KEYS = 64


def usable(q: Tensor, k: Tensor) -> bool:
    """Whether `attention` serves these queries ([rows, heads, T, dim]) and keys ([rows, kv heads, L, dim])."""
    if triton is None or not q.is_cuda or q.dtype not in (torch.float16, torch.bfloat16):
        return False
    rows, heads, t, dim = q.shape
    group = heads // k.shape[1]
    return (dim in (64, 128, 256) and heads % k.shape[1] == 0 and k.shape[0] == rows
            and group * t <= MAX_QUERY_ROWS and _works(q.device, q.dtype, dim))


@cache
def _works(device: torch.device, dtype: torch.dtype, dim: int) -> bool:
    """Triton compiles and runs the kernel here, and it agrees with torch's attention (checked once per device,
    dtype and head size, uncaptured: a compiler missing or failing leaves the step on torch's attention)."""
    g = torch.Generator(device=device).manual_seed(0)
    q = torch.randn(1, 4, 8, dim, device=device, dtype=dtype, generator=g)
    k, v = (torch.randn(1, 2, 40, dim, device=device, dtype=dtype, generator=g) for _ in range(2))
    mask = torch.zeros(8, 40, device=device, dtype=dtype)
    mask[:, 30:] = float("-inf")
    try:
        out = attention(q, k, v, mask)
    except Exception as exc:  # Triton's compiler and driver errors have no common base class
        LOG.warning("the static step keeps torch's attention: Triton's kernel failed here (%s)",
                    str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        return False
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
    if not torch.allclose(out.float(), expected.float(), atol=2e-2, rtol=2e-2):
        LOG.warning("the static step keeps torch's attention: Triton's kernel disagrees with it here")
        return False
    return True


if triton is not None:
    @triton.jit  # type: ignore[untyped-decorator]
    def _attend(q_ptr: Any, k_ptr: Any, v_ptr: Any, m_ptr: Any, o_ptr: Any,
                sq_r: Any, sq_h: Any, sq_t: Any, sk_r: Any, sk_h: Any, sk_l: Any,
                sv_r: Any, sv_h: Any, sv_l: Any, sm_r: Any, sm_t: Any, sm_l: Any,
                so_r: Any, so_h: Any, so_t: Any,
                t_len: Any, keys: Any, scale: Any,
                GROUP: tl.constexpr, HEADS: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                DIM: tl.constexpr) -> None:
        row = tl.program_id(0)
        kv = tl.program_id(1)
        part = tl.program_id(2)  # which HEADS of the kv head's GROUP query heads
        i = tl.arange(0, BLOCK_M)
        head = kv * GROUP + part * HEADS + i // t_len
        t = i % t_len
        live = i < HEADS * t_len
        d = tl.arange(0, DIM)
        q = tl.load(q_ptr + row * sq_r + head[:, None] * sq_h + t[:, None] * sq_t + d[None, :],
                    mask=live[:, None], other=0.0)
        top = tl.full([BLOCK_M], float("-inf"), tl.float32)
        total = tl.zeros([BLOCK_M], tl.float32)
        acc = tl.zeros([BLOCK_M, DIM], tl.float32)
        for start in range(0, keys, BLOCK_N):
            n = start + tl.arange(0, BLOCK_N)
            inside = n < keys
            k = tl.load(k_ptr + row * sk_r + kv * sk_h + n[None, :] * sk_l + d[:, None], mask=inside[None, :],
                        other=0.0)
            scores = tl.dot(q, k) * scale
            bias = tl.load(m_ptr + row * sm_r + t[:, None] * sm_t + n[None, :] * sm_l,
                           mask=live[:, None] & inside[None, :], other=float("-inf"))
            scores = scores + bias.to(tl.float32)
            new_top = tl.maximum(top, tl.max(scores, 1))
            shift = tl.where(new_top == float("-inf"), 0.0, new_top)  # a row that sees nothing yet
            p = tl.exp(scores - shift[:, None])
            alpha = tl.exp(top - shift)
            total = total * alpha + tl.sum(p, 1)
            v = tl.load(v_ptr + row * sv_r + kv * sv_h + n[:, None] * sv_l + d[None, :], mask=inside[:, None],
                        other=0.0)
            acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
            top = new_top
        out = acc / total[:, None]
        tl.store(o_ptr + row * so_r + head[:, None] * so_h + t[:, None] * so_t + d[None, :],
                 out.to(o_ptr.dtype.element_ty), mask=live[:, None])


def _bias(mask: Tensor, rows: int, t: int, keys: int, dtype: torch.dtype) -> Tensor:
    """The mask as an additive [rows, T, keys] view (broadcast dimensions as stride 0)."""
    if mask.dtype == torch.bool:
        mask = torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill_(~mask, float("-inf"))
    if mask.dim() == 4:  # [rows or 1, 1, T or 1, keys]
        mask = mask[:, 0]
    if mask.dim() == 2:
        mask = mask[None]
    return mask.expand(rows, t, keys)


def attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor, heads_per_program: int | None = None) -> Tensor:
    """softmax(q kᵀ / √dim + mask) v for q [rows, heads, T, dim], k/v [rows, kv heads, L, dim] (kv heads shared
    by consecutive query heads, as `enable_gqa`), `mask` additive or boolean, broadcastable to [rows, 1, T, L].
    Returns [rows, heads, T, dim] as `F.scaled_dot_product_attention` does."""
    assert triton is not None
    rows, heads, t, dim = q.shape
    kv_heads, keys = k.shape[1], k.shape[2]
    group = heads // kv_heads
    per = heads_per_program or group
    if k.stride(3) != 1 or v.stride(3) != 1 or q.stride(3) != 1:
        q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    bias = _bias(mask, rows, t, keys, q.dtype)
    out = torch.empty((rows, t, heads, dim), dtype=q.dtype, device=q.device).transpose(1, 2)  # [rows, T, ...] after
    block_m = max(16, triton.next_power_of_2(per * t))
    _attend[(rows, kv_heads, group // per)](
        q, k, v, bias, out,
        q.stride(0), q.stride(1), q.stride(2), k.stride(0), k.stride(1), k.stride(2),
        v.stride(0), v.stride(1), v.stride(2), bias.stride(0), bias.stride(1), bias.stride(2),
        out.stride(0), out.stride(1), out.stride(2),
        t, keys, dim ** -0.5,
        GROUP=group, HEADS=per, BLOCK_M=block_m, BLOCK_N=BLOCK_KEYS, DIM=dim)
    return out
