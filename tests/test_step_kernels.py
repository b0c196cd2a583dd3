"""The static step's Triton kernels (`engine.step_kernels`): the same attention as
`F.scaled_dot_product_attention` up to rounding, for both masks the static steps use; the q|k heads normalised,
weighed and rotated as the other paths do it; SwiGLU; products of a few rows, added to the residual or not; the
CPU-only install says they cannot serve instead of
failing."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from dice_lsp.engine import step_kernels


def test_without_a_gpu_or_in_fp32_the_static_step_keeps_torch_operations() -> None:
    q, k = torch.randn(1, 8, 4, 64), torch.randn(1, 4, 20, 64)
    assert not step_kernels.usable(q, k) and not step_kernels.elementwise_usable(q)
    assert not step_kernels.product_usable(q[0, 0], torch.randn(64, 64))
    if torch.cuda.is_available():
        assert not step_kernels.usable(q.cuda(), k.cuda()), "fp32 keeps torch's attention"
        assert not step_kernels.elementwise_usable(q.cuda())


def _block_mask(t: int, keys: int) -> torch.Tensor:
    last = 40 + torch.arange(t) // 4 * 4 + 3
    allowed = torch.arange(keys)[None, :] <= last[:, None]
    return torch.zeros(t, keys).masked_fill_(~allowed, float("-inf"))


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(1, 32, 8, 8, 96, 128, "block"), (3, 32, 8, 8, 96, 128, "block"),
                                   (1, 32, 8, 8, 768, 128, "block"), (2, 8, 4, 24, 300, 64, "rows"),
                                   (2, 8, 4, 24, 70, 64, "rows"), (2, 16, 16, 5, 33, 64, "rows")])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_the_kernel_is_attention_with_the_static_steps_masks(shape: tuple[int, int, int, int, int, int, str],
                                                             dtype: torch.dtype) -> None:
    if not torch.cuda.is_available() or step_kernels.triton is None:
        pytest.skip("needs a CUDA GPU and Triton")
    rows, heads, kv, t, keys, dim, kind = shape
    torch.manual_seed(0)
    q = torch.randn(rows, t, heads, dim, device="cuda", dtype=dtype).transpose(1, 2)  # the static step's layout
    k, v = (torch.randn(rows, kv, keys, dim, device="cuda", dtype=dtype) for _ in range(2))
    if kind == "block":
        mask = _block_mask(t, keys).to("cuda", dtype)
    else:  # a window step's rows: each row's own real keys
        lengths = torch.randint(keys // 2, keys + 1, (rows,))
        mask = (torch.arange(keys)[None, :] < lengths[:, None])[:, None, None, :].cuda()
    assert step_kernels.usable(q, k)
    with sdpa_kernel(SDPBackend.MATH):
        reference = F.scaled_dot_product_attention(q.float(), k.float(), v.float(),
                                                   attn_mask=mask if mask.dtype == torch.bool else mask.float(),
                                                   enable_gqa=heads != kv)
    for splits in (None, 1, 3):  # the default (keys split by length), one pass, a split that ends past a mask
        out = step_kernels.attention(q, k, v, mask, splits=splits)
        assert out.shape == q.shape and out.dtype == dtype
        assert torch.allclose(out.float(), reference, atol=2e-2, rtol=2e-2), (splits, float((out.float() - reference)
                                                                                           .abs().max()))
        assert out.transpose(1, 2).is_contiguous(), "the static step reshapes [rows, T, heads x dim] without a copy"


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("per_row", [False, True], ids=["shared-positions", "positions-per-row"])
def test_the_heads_kernel_normalises_weighs_and_rotates_the_q_and_k_heads(dtype: torch.dtype, per_row: bool) -> None:
    """Positions per row (`rowwise`: rows at different blocks) give the kernel a table row per token."""
    if not torch.cuda.is_available() or step_kernels.triton is None:
        pytest.skip("needs a CUDA GPU and Triton")
    from dice_lsp.engine.fused import apply_rotary
    from dice_lsp.engine.transformer import rotary

    torch.manual_seed(0)
    rows, t, heads, kv, dim = 2, 8, 32, 8, 128
    qkv = torch.randn(rows, t, heads + 2 * kv, dim, device="cuda", dtype=dtype)
    table = (1 + 0.1 * torch.randn(heads + kv, dim, device="cuda")).to(dtype)
    positions = torch.arange(500, 500 + t, device="cuda")
    if per_row:
        positions = torch.stack((positions, positions + 64))
    cos, sin = (c.to(dtype) for c in rotary(positions, dim, 1e6))  # [T, dim] or [rows, T, dim]
    assert step_kernels.elementwise_usable(qkv)
    out = step_kernels.norm_rotate(qkv, heads + kv, table, cos.reshape(-1, dim), sin.reshape(-1, dim), 1e-6)
    x = qkv[:, :, :heads + kv].float()
    normed = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * table.float()
    expected = apply_rotary(normed, cos.float().unsqueeze(-2), sin.float().unsqueeze(-2))
    assert out.shape == (rows, t, heads + kv, dim) and out.dtype == dtype
    assert torch.allclose(out.float(), expected, atol=3e-2, rtol=2e-2), float((out.float() - expected).abs().max())


@pytest.mark.gpu
def test_the_swiglu_kernel_is_silu_of_the_gate_times_up() -> None:
    if not torch.cuda.is_available() or step_kernels.triton is None:
        pytest.skip("needs a CUDA GPU and Triton")
    torch.manual_seed(0)
    both = torch.randn(3, 8, 2 * 3000, device="cuda", dtype=torch.bfloat16)
    out = step_kernels.swiglu(both)
    expected = F.silu(both[..., :3000].float()) * both[..., 3000:].float()
    assert out.shape == (3, 8, 3000)
    assert torch.allclose(out.float(), expected, atol=2e-2, rtol=1e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("rows", [1, 8, 24, 64])
@pytest.mark.parametrize("shape", [(192, 512), (6144, 256)])
def test_the_product_kernel_multiplies_a_few_rows_and_adds_to_the_residual(
        rows: int, shape: tuple[int, int], monkeypatch: pytest.MonkeyPatch) -> None:
    if not torch.cuda.is_available() or step_kernels.triton is None:
        pytest.skip("needs a CUDA GPU and Triton")
    monkeypatch.setattr(step_kernels, "PRODUCTS", True)
    torch.manual_seed(0)
    n, k = shape
    x = torch.randn(rows, k, device="cuda", dtype=torch.bfloat16)
    weight = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    residual = torch.randn(rows, n, device="cuda", dtype=torch.bfloat16)
    assert step_kernels.product_usable(x, weight)
    product = x.float() @ weight.float().t()
    made = step_kernels.product(x, weight)
    added = step_kernels.product(x, weight, residual.clone(), accumulate=True)
    for out, expected in ((made, product), (added, residual.float() + product)):
        assert out.shape == (rows, n) and out.dtype == torch.bfloat16
        # rounded once to bf16 (a relative step of 2^-8) from an fp32 sum
        assert torch.allclose(out.float(), expected, atol=1e-2, rtol=8e-3), float((out.float() - expected).abs().max())
    assert not step_kernels.product_usable(torch.randn(65, k, device="cuda", dtype=torch.bfloat16), weight)
