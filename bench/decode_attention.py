"""The static step's attention alone on a GPU: `engine.step_kernels`'s Triton kernel against
`F.scaled_dot_product_attention` (its default backend and each one forced), per call, at the shapes the static
steps run.

    python bench/decode_attention.py [--calls 36] [--repeats 20]

Each variant runs `--calls` attentions back to back (a step's layers: 36 for SDAR-8B) captured as one CUDA graph,
replayed `--repeats` times; the table gives µs per call and the largest difference from the math backend's output.
Shapes: SDAR-8B's block step (32 query heads over 8 kv heads, 8 queries per row over a 768-key cache, bf16,
additive [T, L] mask), 1 and 4 rows; dice-tiny's window step (8 over 4 heads, 24 queries over 300 keys, a
[rows, 1, 1, L] boolean mask), 2 rows.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from contextlib import nullcontext

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from dice_lsp.engine import step_kernels

SHAPES = {  # name: rows, heads, kv heads, queries, keys, head dim, mask kind
    "SDAR-8B block step, 1 row": (1, 32, 8, 8, 768, 128, "additive"),
    "SDAR-8B block step, 4 rows": (4, 32, 8, 8, 768, 128, "additive"),
    "dice-tiny window step, 2 rows": (2, 8, 4, 24, 300, 64, "rows"),
}


def inputs(shape: tuple[int, int, int, int, int, int, str], device: torch.device) -> tuple[torch.Tensor, ...]:
    rows, heads, kv, t, keys, dim, kind = shape
    g = torch.Generator(device=device).manual_seed(0)
    q = torch.randn(rows, t, heads, dim, device=device, dtype=torch.bfloat16, generator=g).transpose(1, 2)
    k = torch.randn(rows, kv, keys, dim, device=device, dtype=torch.bfloat16, generator=g)
    v = torch.randn(rows, kv, keys, dim, device=device, dtype=torch.bfloat16, generator=g)
    if kind == "additive":  # block-causal over a cache: the last block's 8 keys partly hidden, the tail unwritten
        last = 512 + torch.arange(t, device=device) // 4 * 4 + 3  # the last key each query's block sees
        allowed = torch.arange(keys, device=device)[None, :] <= last[:, None]
        mask = torch.zeros(t, keys, device=device, dtype=q.dtype).masked_fill_(~allowed, float("-inf"))
    else:
        lengths = torch.tensor([keys, keys - 40][:rows] + [keys] * max(0, rows - 2), device=device)
        allowed = (torch.arange(keys, device=device)[None, :] < lengths[:, None])[:, None, None, :]
        mask = torch.zeros(allowed.shape, device=device, dtype=q.dtype).masked_fill_(~allowed, float("-inf"))
    return q, k, v, mask


def timed(run: Callable[[], torch.Tensor], calls: int, repeats: int) -> float:
    """µs per call: `calls` runs captured as one graph, replayed `repeats` times."""
    from step_products import graph_us

    return graph_us([run] * calls, repeats) / calls


def variants(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor,
             group: int) -> dict[str, tuple[Callable[[], torch.Tensor], object]]:
    """label: (a call, the context it runs in)."""
    def sdpa() -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)

    found: dict[str, tuple[Callable[[], torch.Tensor], object]] = {
        "F.scaled_dot_product_attention (default)": (sdpa, nullcontext())}
    for backend in (SDPBackend.CUDNN_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH):
        found[f"F.scaled_dot_product_attention ({backend.name})"] = (sdpa, sdpa_kernel(backend))
    for per in sorted({group, max(1, group // 2), 1}, reverse=True):
        for splits in (1, None):
            label = f"Triton kernel, {per} query heads per program, " + (
                "keys in one pass" if splits == 1 else "keys split (flash-decoding, the default)")
            found[label] = (lambda per=per, splits=splits: step_kernels.attention(q, k, v, mask, per, splits),
                            nullcontext())
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=36)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    device = torch.device("cuda")
    print(f"{torch.cuda.get_device_name(device)}, torch {torch.__version__}")
    print("| shape | attention | µs per call | max abs diff from math |\n|---|---|---|---|")
    for name, shape in SHAPES.items():
        q, k, v, mask = inputs(shape, device)
        with sdpa_kernel(SDPBackend.MATH):
            reference = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True).float()
        group = shape[1] // shape[2]
        for label, (run, context) in variants(q, k, v, mask, group).items():
            try:
                with context:  # type: ignore[attr-defined]
                    out = run().float()
                    us = timed(run, args.calls, args.repeats)
            except RuntimeError as exc:
                print(f"| {name} | {label} | - ({str(exc).splitlines()[0][:60]}) | - |")
                continue
            print(f"| {name} | {label} | {us:.1f} | {(out - reference).abs().max().item():.4f} |")


if __name__ == "__main__":
    main()
