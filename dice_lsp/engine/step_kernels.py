"""Triton kernels of the static step on a GPU (the call `block_graph` and `window_graph` capture): fewer,
fused kernels for its small per-layer operations, whose fixed costs add up over 36 layers.

- **Attention** (`attention`): one kernel instead of cuDNN's for a few queries over a cache. A block step
  (8 queries per row over a 768-key cache at SDAR-8B's shape) spends ~20 µs per layer in
  `F.scaled_dot_product_attention`, most of it fixed cost: its work is ~0.4 MB of keys and values per kv head.
  Here one program runs per (row, kv head, group of query heads): it loads its query heads' queries once
  ([heads x T, head dim], the heads that share the kv head side by side, so keys and values are read once for
  all of them), walks the keys in blocks with an online softmax (fp32 running max and sum), adds the call's
  additive mask and writes the output. Same arithmetic as attention with an additive mask, other rounding.
- **q|k heads** (`norm_rotate`): RMS-normalise each q and k head of the q|k|v product, weigh it by its norm's
  weight and rotate it (rotary position), in one kernel instead of three or four; in fp32, rounded once.
- **SwiGLU** (`swiglu`): silu(gate) x up from the gate|up product in one kernel instead of two; rounded once.
- **Products of a few rows** (`product`): x [M <= 64, K] times a weight [N, K]ᵀ, optionally added to the output
  (the residual stream: the output and down projections). At a step's 8 rows a product only reads its weight;
  cuBLAS's kernels for such shapes read SDAR-8B's o and down weights at 68-84% of a copy's rate on an H100,
  this one (each program a slice of output columns over the whole K, its weight tiles pipelined) at 80-91%.

Used by the static step on CUDA in fp16/bf16 (`usable`: Triton compiles and agrees with torch here, checked
once); every other path, and fp32, keeps torch's operations. Without Triton (the CPU-only install) or a GPU the
module imports and says no.
"""

from __future__ import annotations

import logging
from functools import cache

import torch
import torch.nn.functional as F
from torch import Tensor

try:  # the kernels take CUDA tensors only: where there is no GPU, Triton (~0.2 s to import) is not loaded
    if not torch.cuda.is_available():
        raise ImportError("no CUDA device")
    import triton
    import triton.language as tl
except ImportError:  # the CPU-only install (torch's CPU wheel brings no Triton), or no GPU
    triton = None
    tl = None

ENABLED = True  # the static step's kernels where they serve (`usable`...; an H100: a step 8.06 -> 7.10 ms at SDAR-8B)
PRODUCTS = True  # `product` in the static step too (an H100: the step 7.07 -> 6.70 ms with it)
LOG = logging.getLogger("dice_lsp.engine")
MAX_QUERY_ROWS = 128  # query heads sharing a kv head x queries per row, at most (one program's tile)
BLOCK_KEYS = 64
SPLIT_KEYS = 128  # keys per program by default (`attention`'s splits)
MAX_SPLITS = 16
MAX_PRODUCT_ROWS = 64  # `product`'s rows at most (one tile, and fewer stages past 16 rows); more rows: cuBLAS
PRODUCT_BLOCK_K = 256


def usable(q: Tensor, k: Tensor) -> bool:
    """Whether `attention` serves these queries ([rows, heads, T, dim]) and keys ([rows, kv heads, L, dim])."""
    if not ENABLED or triton is None or not q.is_cuda or q.dtype not in (torch.float16, torch.bfloat16):
        return False
    rows, heads, t, dim = q.shape
    group = heads // k.shape[1]
    return (dim in (64, 128, 256) and heads % k.shape[1] == 0 and k.shape[0] == rows
            and group * t <= MAX_QUERY_ROWS and _works(q.device, q.dtype, dim))


@cache
def _works(device: torch.device, dtype: torch.dtype, dim: int) -> bool:
    """Triton compiles and runs the kernels here, and they agree with torch's operations (checked once per
    device, dtype and head size, uncaptured: a compiler missing or failing leaves the step on torch's)."""
    g = torch.Generator(device=device).manual_seed(0)
    q = torch.randn(1, 4, 8, dim, device=device, dtype=dtype, generator=g)
    k, v = (torch.randn(1, 2, 40, dim, device=device, dtype=dtype, generator=g) for _ in range(2))
    mask = torch.zeros(8, 40, device=device, dtype=dtype)
    mask[:, 30:] = float("-inf")
    qkv = torch.randn(1, 8, 8, dim, device=device, dtype=dtype, generator=g)
    table = 1 + 0.1 * torch.randn(6, dim, device=device, dtype=dtype, generator=g)
    angles = torch.rand(8, dim // 2, device=device, generator=g) * 6
    cos, sin = (torch.cat((f, f), dim=-1).to(dtype) for f in (angles.cos(), angles.sin()))
    gate_up = torch.randn(8, 96, device=device, dtype=dtype, generator=g)
    inputs = torch.randn(8, 512, device=device, dtype=dtype, generator=g)
    weight = torch.randn(64, 512, device=device, dtype=dtype, generator=g)
    residual = torch.randn(8, 64, device=device, dtype=dtype, generator=g)
    try:
        got = [attention(q, k, v, mask), norm_rotate(qkv, 6, table, cos, sin, 1e-6), swiglu(gate_up)]
        if PRODUCTS:
            got += [product(inputs, weight), product(inputs, weight, residual.clone(), accumulate=True)]
    except Exception as exc:  # Triton's compiler and driver errors have no common base class
        LOG.warning("the static step keeps torch's operations: Triton's kernels failed here (%s)",
                    str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        return False
    x = qkv[:, :, :6].float()
    normed = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * table.float()
    half = dim // 2
    rotated = torch.cat((-normed[..., half:], normed[..., :half]), dim=-1)
    products = inputs.float() @ weight.float().t()
    expected = [F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True).float(),
                normed * cos.float()[None, :, None] + rotated * sin.float()[None, :, None],
                F.silu(gate_up[:, :48].float()) * gate_up[:, 48:].float(),
                products, residual.float() + products]
    scale = products.abs().max().item()  # the products' tolerance: bf16's relative step at their size
    tolerances = (3e-2, 3e-2, 3e-2, 1e-2 * scale, 1e-2 * scale)
    if not all(torch.allclose(a.float(), b, atol=atol, rtol=3e-2)
               for a, b, atol in zip(got, expected, tolerances, strict=False)):
        LOG.warning("the static step keeps torch's operations: Triton's kernels disagree with them here")
        return False
    return True


def product_usable(x: Tensor, weight: Tensor) -> bool:
    """Whether `product` serves rows `x` ([M, K]) times `weight` ([N, K])ᵀ."""
    n, k = weight.shape
    return (PRODUCTS and x.shape[0] <= MAX_PRODUCT_ROWS and n % _product_blocks(n)[0] == 0 and k % PRODUCT_BLOCK_K == 0
            and weight.is_contiguous() and weight.is_cuda and _product_stages(x.shape[0], n, x) >= 2
            and x.dtype == weight.dtype and elementwise_usable(x))


def elementwise_usable(x: Tensor) -> bool:
    """Whether `norm_rotate`/`swiglu` serve a tensor like `x` (the static step's activations)."""
    return (ENABLED and triton is not None and x.is_cuda and x.dtype in (torch.float16, torch.bfloat16)
            and _works(x.device, x.dtype, 64))


if triton is not None:
    @triton.jit  # type: ignore[untyped-decorator]
    def _attend(q_ptr, k_ptr, v_ptr, m_ptr, o_ptr, part_ptr, stat_ptr,  # type: ignore[no-untyped-def]
                sq_r, sq_h, sq_t, sk_r, sk_h, sk_l,
                sv_r, sv_h, sv_l, sm_r, sm_t, sm_l,
                so_r, so_h, so_t,
                t_len, keys, scale, heads_total, span,
                GROUP: tl.constexpr, HEADS: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                DIM: tl.constexpr, SPLITS: tl.constexpr):
        row = tl.program_id(0)
        kv = tl.program_id(1)
        part = tl.program_id(2) // SPLITS  # which HEADS of the kv head's GROUP query heads
        split = tl.program_id(2) % SPLITS  # which `span` keys (flash-decoding: partial results, then `_combine`)
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
        first = split * span
        last = tl.minimum(first + span, keys)
        for start in range(first, last, BLOCK_N):
            n = start + tl.arange(0, BLOCK_N)
            inside = n < last
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
        if SPLITS == 1:
            out = acc / total[:, None]
            tl.store(o_ptr + row * so_r + head[:, None] * so_h + t[:, None] * so_t + d[None, :],
                     out.to(o_ptr.dtype.element_ty), mask=live[:, None])
        else:  # this split's unnormalised sum, running max and total: [rows, heads, T, SPLITS, ...]
            query = (row * heads_total + head) * t_len + t
            tl.store(part_ptr + (query[:, None] * SPLITS + split) * DIM + d[None, :], acc, mask=live[:, None])
            tl.store(stat_ptr + (query * SPLITS + split) * 2, top, mask=live)
            tl.store(stat_ptr + (query * SPLITS + split) * 2 + 1, total, mask=live)

    @triton.jit  # type: ignore[untyped-decorator]
    def _combine(part_ptr, stat_ptr, o_ptr, so_r, so_h, so_t, heads_total,  # type: ignore[no-untyped-def]
                 t_len, SPLITS: tl.constexpr, SPLITS_P2: tl.constexpr, DIM: tl.constexpr):
        query = tl.program_id(0)
        t = query % t_len
        head = (query // t_len) % heads_total
        row = query // (t_len * heads_total)
        s = tl.arange(0, SPLITS_P2)
        live = s < SPLITS
        tops = tl.load(stat_ptr + (query * SPLITS + s) * 2, mask=live, other=float("-inf"))
        totals = tl.load(stat_ptr + (query * SPLITS + s) * 2 + 1, mask=live, other=0.0)
        top = tl.max(tops, 0)
        weights = tl.where(tops == float("-inf"), 0.0, tl.exp(tops - top))
        d = tl.arange(0, DIM)
        parts = tl.load(part_ptr + (query * SPLITS + s[:, None]) * DIM + d[None, :], mask=live[:, None], other=0.0)
        out = tl.sum(parts * weights[:, None], 0) / tl.sum(totals * weights, 0)
        tl.store(o_ptr + row * so_r + head * so_h + t * so_t + d, out.to(o_ptr.dtype.element_ty))


    @triton.jit  # type: ignore[untyped-decorator]
    def _norm_rotate(x_ptr, w_ptr, cos_ptr, sin_ptr, o_ptr,  # type: ignore[no-untyped-def]
                     sx_tok, so_tok, heads, t_len, eps,
                     BLOCK_H: tl.constexpr, HALF: tl.constexpr):
        token = tl.program_id(0)
        t = token % t_len
        h = tl.arange(0, BLOCK_H)
        d = tl.arange(0, HALF)
        live = (h < heads)[:, None]
        base = x_ptr + token * sx_tok + h[:, None] * (2 * HALF)
        x1 = tl.load(base + d[None, :], mask=live, other=0.0).to(tl.float32)
        x2 = tl.load(base + HALF + d[None, :], mask=live, other=0.0).to(tl.float32)
        scale = tl.rsqrt((tl.sum(x1 * x1, 1) + tl.sum(x2 * x2, 1)) / (2 * HALF) + eps)
        w1 = tl.load(w_ptr + h[:, None] * (2 * HALF) + d[None, :], mask=live, other=0.0).to(tl.float32)
        w2 = tl.load(w_ptr + h[:, None] * (2 * HALF) + HALF + d[None, :], mask=live, other=0.0).to(tl.float32)
        y1 = x1 * scale[:, None] * w1
        y2 = x2 * scale[:, None] * w2
        c1 = tl.load(cos_ptr + t * 2 * HALF + d).to(tl.float32)[None, :]
        c2 = tl.load(cos_ptr + t * 2 * HALF + HALF + d).to(tl.float32)[None, :]
        s1 = tl.load(sin_ptr + t * 2 * HALF + d).to(tl.float32)[None, :]
        s2 = tl.load(sin_ptr + t * 2 * HALF + HALF + d).to(tl.float32)[None, :]
        out = o_ptr + token * so_tok + h[:, None] * (2 * HALF)
        tl.store(out + d[None, :], (y1 * c1 - y2 * s1).to(o_ptr.dtype.element_ty), mask=live)
        tl.store(out + HALF + d[None, :], (y2 * c2 + y1 * s2).to(o_ptr.dtype.element_ty), mask=live)

    @triton.jit  # type: ignore[untyped-decorator]
    def _swiglu(x_ptr, o_ptr, width, sx, so, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
        row = tl.program_id(0)
        i = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
        live = i < width
        gate = tl.load(x_ptr + row * sx + i, mask=live, other=0.0).to(tl.float32)
        up = tl.load(x_ptr + row * sx + width + i, mask=live, other=0.0).to(tl.float32)
        tl.store(o_ptr + row * so + i, (gate * tl.sigmoid(gate) * up).to(o_ptr.dtype.element_ty), mask=live)

    @triton.jit  # type: ignore[untyped-decorator]
    def _product(x_ptr, w_ptr, o_ptr, rows, k_len, sx, sw, so,  # type: ignore[no-untyped-def]
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, ACCUMULATE: tl.constexpr):
        n = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
        m = tl.arange(0, BLOCK_M)
        live = m[:, None] < rows
        acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
        for start in range(0, k_len, BLOCK_K):
            kk = start + tl.arange(0, BLOCK_K)
            x = tl.load(x_ptr + m[:, None] * sx + kk[None, :], mask=live, other=0.0)
            w = tl.load(w_ptr + n[None, :] * sw + kk[:, None])  # [BLOCK_K, BLOCK_N]: the weight's rows n, read along K
            acc += tl.dot(x, w)
        out = o_ptr + m[:, None] * so + n[None, :]
        if ACCUMULATE:
            acc += tl.load(out, mask=live, other=0.0).to(tl.float32)
        tl.store(out, acc.to(o_ptr.dtype.element_ty), mask=live)


def _bias(mask: Tensor, rows: int, t: int, keys: int, dtype: torch.dtype) -> Tensor:
    """The mask as an additive [rows, T, keys] view (broadcast dimensions as stride 0)."""
    if mask.dtype == torch.bool:
        mask = torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill_(~mask, float("-inf"))
    if mask.dim() == 4:  # [rows or 1, 1, T or 1, keys]
        mask = mask[:, 0]
    if mask.dim() == 2:
        mask = mask[None]
    return mask.expand(rows, t, keys)


def attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor, heads_per_program: int | None = None,
              splits: int | None = None) -> Tensor:
    """softmax(q kᵀ / √dim + mask) v for q [rows, heads, T, dim], k/v [rows, kv heads, L, dim] (kv heads shared
    by consecutive query heads, as `enable_gqa`), `mask` additive or boolean, broadcastable to [rows, 1, T, L].
    Returns [rows, heads, T, dim] as `F.scaled_dot_product_attention` does.

    `splits`: the keys are cut into this many spans, one program each, whose partial results a second kernel
    joins (flash-decoding: more programs at work on a long cache; default `SPLIT_KEYS` keys a span)."""
    assert triton is not None
    rows, heads, t, dim = q.shape
    kv_heads, keys = k.shape[1], k.shape[2]
    group = heads // kv_heads
    per = heads_per_program or group
    if splits is None:
        splits = max(1, min(MAX_SPLITS, -(-keys // SPLIT_KEYS)))
    span = -(-keys // splits // BLOCK_KEYS) * BLOCK_KEYS
    splits = -(-keys // span)
    if k.stride(3) != 1 or v.stride(3) != 1 or q.stride(3) != 1:
        q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    bias = _bias(mask, rows, t, keys, q.dtype)
    out = torch.empty((rows, t, heads, dim), dtype=q.dtype, device=q.device).transpose(1, 2)  # [rows, T, ...] after
    partial = torch.empty((rows * heads * t * splits * dim,) if splits > 1 else (1,), dtype=torch.float32,
                          device=q.device)
    stats = torch.empty((rows * heads * t * splits * 2,) if splits > 1 else (1,), dtype=torch.float32,
                        device=q.device)
    block_m = max(16, triton.next_power_of_2(per * t))
    _attend[(rows, kv_heads, group // per * splits)](
        q, k, v, bias, out, partial, stats,
        q.stride(0), q.stride(1), q.stride(2), k.stride(0), k.stride(1), k.stride(2),
        v.stride(0), v.stride(1), v.stride(2), bias.stride(0), bias.stride(1), bias.stride(2),
        out.stride(0), out.stride(1), out.stride(2),
        t, keys, dim ** -0.5, heads, span,
        GROUP=group, HEADS=per, BLOCK_M=block_m, BLOCK_N=BLOCK_KEYS, DIM=dim, SPLITS=splits)
    if splits > 1:
        _combine[(rows * heads * t,)](partial, stats, out, out.stride(0), out.stride(1), out.stride(2), heads, t,
                                      SPLITS=splits, SPLITS_P2=triton.next_power_of_2(splits), DIM=dim)
    return out


def norm_rotate(qkv: Tensor, heads: int, table: Tensor, cos: Tensor, sin: Tensor, eps: float) -> Tensor:
    """The first `heads` heads of `qkv` ([rows, T, all heads, dim], contiguous), each RMS-normalised, weighed by
    its row of `table` ([heads, dim]) and rotated by `cos`/`sin` ([T, dim], or [rows * T, dim] where each row has
    its own positions): [rows, T, heads, dim]."""
    assert triton is not None
    rows, t, _, dim = qkv.shape
    if qkv.stride(3) != 1 or qkv.stride(2) != dim or qkv.stride(0) != t * qkv.stride(1):
        qkv = qkv.contiguous()
    out = torch.empty((rows, t, heads, dim), dtype=qkv.dtype, device=qkv.device)
    _norm_rotate[(rows * t,)](qkv, table.contiguous(), cos.contiguous(), sin.contiguous(), out,
                              qkv.stride(1), out.stride(1), heads, cos.shape[0], eps,
                              BLOCK_H=triton.next_power_of_2(heads), HALF=dim // 2)
    return out


def product(x: Tensor, weight: Tensor, out: Tensor | None = None, accumulate: bool = False) -> Tensor:
    """x [M, K] times weight [N, K]ᵀ into `out` ([M, N], made when None); `accumulate`: added to what `out` holds
    (fp32 sum, rounded once, as `addmm_`). Needs `product_usable`. Wide outputs (N >= 6144) take 64 columns a
    program, narrower ones 32 (twice the programs, the pipeline deeper): the faster of the sweep on an H100 at
    SDAR-8B's shapes (`bench/step_products.py`)."""
    assert triton is not None
    rows, k = x.shape
    n = weight.shape[0]
    if x.stride(1) != 1:
        x = x.contiguous()
    if out is None:
        out = torch.empty((rows, n), dtype=x.dtype, device=x.device)
    assert out.stride(1) == 1 and out.shape == (rows, n)
    block_n = _product_blocks(n)[0]
    stages = _product_stages(rows, n, x)
    _product[(n // block_n,)](x, weight, out, rows, k, x.stride(0), weight.stride(0), out.stride(0),
                              BLOCK_M=max(16, triton.next_power_of_2(rows)), BLOCK_N=block_n,
                              BLOCK_K=PRODUCT_BLOCK_K, ACCUMULATE=accumulate, num_warps=4, num_stages=stages)
    return out


def _product_blocks(n: int) -> tuple[int, int]:
    """`product`'s output columns per program and pipeline stages (at most) for an output `n` wide."""
    return (64, 4) if n >= 6144 else (32, 6)


def _product_stages(rows: int, n: int, x: Tensor) -> int:
    """The pipeline stages `product` runs: its default, fewer where a stage's tiles (x's rows padded to a power of
    two, the weight's columns, `PRODUCT_BLOCK_K` each) would not fit the device's shared memory that many times."""
    block_n, stages = _product_blocks(n)
    per_stage = (max(16, 1 << (rows - 1).bit_length()) + block_n) * PRODUCT_BLOCK_K * x.element_size()
    return min(stages, _shared_memory(x.device.index or 0) // per_stage)


@cache
def _shared_memory(index: int) -> int:
    """Bytes of shared memory a program may use on CUDA device `index` (as Triton checks a launch)."""
    try:
        return int(triton.runtime.driver.active.utils.get_device_properties(index)["max_shared_mem"])
    except Exception:  # a driver without the query: the smallest of current GPUs'
        return 96 * 1024


def swiglu(gate_up: Tensor) -> Tensor:
    """silu(gate) x up for `gate_up` [..., 2 x width] (gate first, as `MLP.static`'s product): [..., width]."""
    assert triton is not None
    width = gate_up.shape[-1] // 2
    rows = gate_up.reshape(-1, 2 * width)
    out = torch.empty((rows.shape[0], width), dtype=gate_up.dtype, device=gate_up.device)
    block = 1024
    _swiglu[(rows.shape[0], triton.cdiv(width, block))](rows, out, width, rows.stride(0), out.stride(0), BLOCK=block)
    return out.view(*gate_up.shape[:-1], width)
