"""The static step's Triton kernels (`engine.step_kernels`): the same attention as
`F.scaled_dot_product_attention` up to rounding, for both masks the static steps use; the q|k heads normalised,
weighed and rotated as the other paths do it; SwiGLU; products of a few rows, added to the residual or not, with the
RMSNorm before them inside or not (the kernel alone, on a GPU and under Triton's interpreter, and the whole static
step with and without it); the CPU-only install says they cannot serve instead of failing."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from dice_lsp.engine import step_kernels


def test_without_a_gpu_or_in_fp32_the_static_step_keeps_torch_operations() -> None:
    q, k = torch.randn(1, 8, 4, 64), torch.randn(1, 4, 20, 64)
    assert not step_kernels.usable(q, k) and not step_kernels.elementwise_usable(q)
    assert not step_kernels.product_usable(q[0, 0], torch.randn(64, 64))
    assert not step_kernels.norm_product_usable(torch.randn(8, 512), torch.randn(64, 512), torch.ones(512))
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


# The normalising product (`product(..., norm=(g, eps))`) against the unfused step's arithmetic: `F.rms_norm` (fp32,
# rounded once to the dtype after the weight), then the product (an fp32 sum, rounded once). Rounded once, the product
# is within half a step of the dtype of the exact product of the unfused rows, and within one step of another product
# that rounds once (rtol 2^-7 in bf16, 2^-10 in fp16: one step, relative), plus, where the two normalisations round
# an element of a row apart (another order of the squares' sum, another rsqrt), that element's step times its
# weight: atol 2e-3 of the largest output (such an element moves an output by ~1e-3 at most here).
RTOL = {torch.bfloat16: 2 ** -7, torch.float16: 2 ** -10}
EPS = 1e-6


def _norm_inputs(rows: int, n: int, k: int, dtype: torch.dtype, device: str) -> tuple[torch.Tensor, ...]:
    """x [rows, K] like a residual stream (one channel 8x the rest), a norm weight around 1, a weight [N, K] whose
    products are O(1), a residual [rows, N]."""
    generator = torch.Generator(device=device).manual_seed(rows * n + k)
    x = 3 * torch.randn(rows, k, generator=generator, device=device)
    x[:, 7] *= 8
    g = 1 + 0.2 * torch.randn(k, generator=generator, device=device)
    weight = torch.randn(n, k, generator=generator, device=device) / k ** 0.5
    residual = torch.randn(rows, n, generator=generator, device=device)
    return tuple(t.to(dtype) for t in (x, g, weight, residual))


def _unfused_rows(x: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """`F.rms_norm(x, (K,), g, EPS)` as CUDA computes it in fp16/bf16: in fp32, rounded once after the weight."""
    return F.rms_norm(x.float(), (x.shape[-1],), g.float(), EPS).to(x.dtype)


def _exact(rows: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """rows [M, K] times weight [N, K]ᵀ, exactly enough (fp64, whatever the device's matmul settings)."""
    return rows.double() @ weight.double().t()


def _assert_close(out: torch.Tensor, expected: torch.Tensor, rtol: float, what: str) -> None:
    atol = 2e-3 * float(expected.abs().max())
    assert torch.allclose(out.float(), expected.float(), atol=atol, rtol=rtol), (
        what, float((out.float() - expected.float()).abs().max()), atol)


INTERPRETED = """
import sys
import torch
from dice_lsp.engine import step_kernels

cases, eps, out = torch.load(sys.argv[1]), float(sys.argv[3]), []
for x, g, weight, residual in cases:
    made = step_kernels.product(x, weight, norm=(g, eps))
    added = step_kernels.product(x, weight, residual.clone(), accumulate=True, norm=(g, eps))
    out.append((made, added))
torch.save(out, sys.argv[2])
"""


def test_the_normalising_product_under_triton_s_interpreter_is_rms_norm_then_the_product(tmp_path: Path) -> None:
    """The kernel's arithmetic on a CPU (`TRITON_INTERPRET=1`, in a child process: the variable is read when the
    kernels are defined), fp16 at SDAR-8B's K (a slice of its q|k|v rows: each program is a slice of the output's
    columns) and dice-tiny's q|k|v and gate|up shapes. bf16 only on a GPU: the interpreter multiplies bf16's bit
    patterns in `tl.dot` (triton-lang/triton#11584, not supported there)."""
    pytest.importorskip("triton", reason="Triton's interpreter runs the kernel on a CPU; this install has no Triton")
    shapes = [(rows, n, k) for rows in (1, 8, 64) for n, k in ((192, 4096), (1024, 512))] + [(8, 2816, 512)]
    cases = [_norm_inputs(rows, n, k, torch.float16, "cpu") for rows, n, k in shapes]
    torch.save(cases, tmp_path / "cases.pt")
    done = subprocess.run([sys.executable, "-c", INTERPRETED, str(tmp_path / "cases.pt"), str(tmp_path / "out.pt"),
                           repr(EPS)],
                          env={**os.environ, "TRITON_INTERPRET": "1"}, capture_output=True, text=True, timeout=600,
                          cwd=Path(__file__).resolve().parents[1])
    assert done.returncode == 0, done.stderr[-4000:]
    for (rows, n, k), (x, g, weight, residual), (made, added) in zip(
            shapes, cases, torch.load(tmp_path / "out.pt"), strict=True):
        product = _exact(_unfused_rows(x, g), weight)
        assert made.shape == added.shape == (rows, n) and made.dtype == added.dtype == torch.float16
        _assert_close(made, product, RTOL[torch.float16], f"{(rows, n, k)}")
        _assert_close(added, residual.double() + product, RTOL[torch.float16], f"{(rows, n, k)} accumulated")


SDAR_8B_PRODUCTS = [("SDAR-8B q|k|v", 6144, 4096), ("SDAR-8B gate|up", 24576, 4096), ("SDAR-8B head", 151936, 4096),
                    ("dice-tiny q|k|v", 1024, 512), ("dice-tiny gate|up", 2816, 512), ("dice-tiny head", 8192, 512)]


@pytest.mark.gpu
@pytest.mark.parametrize("rows", [1, 8, 32, 64])
@pytest.mark.parametrize("shape", SDAR_8B_PRODUCTS, ids=[s[0] for s in SDAR_8B_PRODUCTS])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_the_normalising_product_is_rms_norm_then_the_product(
        rows: int, shape: tuple[str, int, int], dtype: torch.dtype, monkeypatch: pytest.MonkeyPatch) -> None:
    """At SDAR-8B's and dice-tiny's shapes, added to a residual or not: the exact product of `F.rms_norm`'s rows,
    `F.rms_norm` then `F.linear` (cuBLAS's reductions in fp32, so that it too rounds once) and the unfused step's
    `product` of `F.rms_norm`'s rows."""
    if not torch.cuda.is_available() or step_kernels.triton is None:
        pytest.skip("needs a CUDA GPU and Triton")
    monkeypatch.setattr(step_kernels, "PRODUCTS", True)
    monkeypatch.setattr(step_kernels, "FUSED_NORMS", True)
    monkeypatch.setattr(torch.backends.cuda.matmul, "allow_bf16_reduced_precision_reduction", False)
    monkeypatch.setattr(torch.backends.cuda.matmul, "allow_fp16_reduced_precision_reduction", False)
    _, n, k = shape
    x, g, weight, residual = _norm_inputs(rows, n, k, dtype, "cuda")
    assert step_kernels.norm_product_usable(x, weight, g)
    normed = F.rms_norm(x, (k,), g, EPS)  # the unfused step's rows (`RMSNorm` in its CUDA form)
    made = step_kernels.product(x, weight, norm=(g, EPS))
    added = step_kernels.product(x, weight, residual.clone(), accumulate=True, norm=(g, EPS))
    assert made.shape == added.shape == (rows, n) and made.dtype == added.dtype == dtype
    exact = _exact(normed, weight)
    _assert_close(made, exact, RTOL[dtype], "exact")
    _assert_close(made, F.linear(normed, weight), RTOL[dtype], "F.rms_norm, F.linear")
    _assert_close(made, step_kernels.product(normed, weight), RTOL[dtype], "F.rms_norm, product")
    _assert_close(added, residual.double() + exact, RTOL[dtype], "accumulated, exact")
    _assert_close(added, step_kernels.product(normed, weight, residual.clone(), accumulate=True), RTOL[dtype],
                  "F.rms_norm, product accumulated")


# dice-tiny's shape as a block model (the embedded model is bidirectional), and SDAR-8B's with two of its layers
STEP_SHAPES: dict[str, dict[str, Any]] = {"dice-tiny": dict(attention="block", model_type="sdar", block_size=4),
                                          "SDAR-8B, 2 layers": dict(num_hidden_layers=2, max_position_embeddings=256)}


def _random_model(name: str, dtype: torch.dtype) -> Any:
    from dice_lsp.engine.presets import DICE_TINY, SDAR_8B
    from dice_lsp.engine.transformer import Transformer

    cfg = dataclasses.replace(DICE_TINY if name == "dice-tiny" else SDAR_8B, **STEP_SHAPES[name])
    torch.manual_seed(0)
    with torch.device("cuda"):
        lm = Transformer(cfg)
    lm.init_weights(std=0.02)
    with torch.no_grad():
        for param_name, p in lm.named_parameters():
            if param_name.endswith("layernorm.weight") or param_name == "model.norm.weight":
                p.copy_(1 + 0.2 * torch.randn_like(p))  # norm weights that matter
    return lm.to(dtype).eval()


@pytest.mark.gpu
@pytest.mark.parametrize("rows", [1, 4])
@pytest.mark.parametrize("name", list(STEP_SHAPES))
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_the_static_step_with_its_norms_inside_the_products_gives_the_unfused_step_s_logits(
        name: str, dtype: torch.dtype, rows: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """A block's first call and a window step (`BlockStepper`, as a generation runs them), uncaptured and replayed,
    with the RMSNorms inside the q|k|v, gate|up and head products (`FUSED_NORMS`) and apart: the same logits up to
    the normalisations' rounding (atol 2e-2 of the largest, which a missing norm weight or a row's wrong rms exceeds
    many times), the same top token wherever the unfused step's two best are further apart than that; and the fused
    step runs every norm that precedes a product inside it (2 a layer and the head's)."""
    if not torch.cuda.is_available() or step_kernels.triton is None:
        pytest.skip("needs a CUDA GPU and Triton")
    from dice_lsp.engine.block_graph import BlockStepper

    lm = _random_model(name, dtype)
    ids = torch.randint(10, lm.config.vocab_size, (rows, 24), generator=torch.Generator().manual_seed(1)).cuda()
    normalising: list[bool] = []
    product: Callable[..., torch.Tensor] = step_kernels.product

    def counted(*args: Any, **kwargs: Any) -> torch.Tensor:
        normalising.append(kwargs.get("norm") is not None)
        return product(*args, **kwargs)

    monkeypatch.setattr(step_kernels, "product", counted)

    def run(fused: bool, capture: bool) -> tuple[torch.Tensor, torch.Tensor]:
        monkeypatch.setattr(step_kernels, "FUSED_NORMS", fused)
        with torch.inference_mode():
            stepper = BlockStepper(lm, rows, 64, capture=capture)
            first = stepper.first(lm, ids, 20).clone()  # positions 0..20, uncaptured (its own length)
            normalising.clear()
            step = stepper.step(lm, ids, 20).clone()  # the window 16..24: replayed where captured
            torch.cuda.synchronize()
        if not capture:
            assert sum(normalising) == (2 * lm.config.num_hidden_layers + 1 if fused else 0), normalising
        return first, step

    apart = run(False, False)
    for got in (run(True, False), run(True, True)):
        for fused, unfused, what in zip(got, apart, ("first call", "window step"), strict=True):
            assert fused.shape == unfused.shape and fused.dtype == unfused.dtype == dtype
            atol = 2e-2 * float(unfused.abs().max())
            assert torch.allclose(fused.float(), unfused.float(), atol=atol, rtol=0), (
                what, float((fused.float() - unfused.float()).abs().max()), atol)
            best = unfused.float().topk(2, dim=-1).values
            clear = best[..., 0] - best[..., 1] > 2 * atol
            assert torch.equal(fused.argmax(-1)[clear], unfused.argmax(-1)[clear]), what
