"""The static step's Triton attention (`engine.decode_attention`): the same attention as
`F.scaled_dot_product_attention` up to rounding, for both masks the static steps use; the CPU-only install says
it cannot serve instead of failing."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from dice_lsp.engine import decode_attention


def test_without_a_gpu_or_in_fp32_the_static_step_keeps_torch_attention() -> None:
    q, k = torch.randn(1, 8, 4, 64), torch.randn(1, 4, 20, 64)
    assert not decode_attention.usable(q, k)
    if torch.cuda.is_available():
        assert not decode_attention.usable(q.cuda(), k.cuda()), "fp32 keeps torch's attention"


def _block_mask(t: int, keys: int) -> torch.Tensor:
    last = 40 + torch.arange(t) // 4 * 4 + 3
    allowed = torch.arange(keys)[None, :] <= last[:, None]
    return torch.zeros(t, keys).masked_fill_(~allowed, float("-inf"))


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(1, 32, 8, 8, 96, 128, "block"), (3, 32, 8, 8, 96, 128, "block"),
                                   (2, 8, 4, 24, 70, 64, "rows"), (2, 16, 16, 5, 33, 64, "rows")])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_the_kernel_is_attention_with_the_static_steps_masks(shape: tuple[int, int, int, int, int, int, str],
                                                             dtype: torch.dtype) -> None:
    if not torch.cuda.is_available() or decode_attention.triton is None:
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
    assert decode_attention.usable(q, k)
    with sdpa_kernel(SDPBackend.MATH):
        reference = F.scaled_dot_product_attention(q.float(), k.float(), v.float(),
                                                   attn_mask=mask if mask.dtype == torch.bool else mask.float(),
                                                   enable_gqa=heads != kv)
    out = decode_attention.attention(q, k, v, mask)
    assert out.shape == q.shape and out.dtype == dtype
    assert torch.allclose(out.float(), reference, atol=2e-2, rtol=2e-2), float((out.float() - reference).abs().max())
    assert out.transpose(1, 2).is_contiguous(), "the static step reshapes [rows, T, heads x dim] without a copy"
