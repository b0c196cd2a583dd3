"""Count the device operations of one layer of the static block step (`Transformer.static_forward`).

Counts the aten operations that do work (views, reshapes and allocations excluded) while a small
SDAR-shaped model (GQA 4:1, head dim 64) runs one window step of [rows, 8] ids, on the CPU with the RMSNorms
in their CUDA form (`F.rms_norm`): each counted operation is one kernel launch on a GPU (cuBLAS may add a
split-K reduction to a matrix product; attention counts as one). Prints the operations of one layer and
the total per step; the number to compare across versions of the step. Usage:
`python bench/static_step_ops.py [--rows 1]`.
"""

from __future__ import annotations

import argparse
from collections import Counter
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from dice_lsp.engine import transformer
from dice_lsp.engine.config import ModelConfig
from dice_lsp.engine.transformer import Transformer

NOT_KERNELS = {"view", "_unsafe_view", "reshape", "transpose", "t", "permute", "slice", "select", "split",
               "split_with_sizes", "chunk", "unsqueeze", "squeeze", "expand", "as_strided", "alias", "detach",
               "empty", "empty_strided", "empty_like", "lift_fresh", "_reshape_alias", "unbind", "narrow"}


class OpCounter(TorchDispatchMode):
    """Counts every aten operation that is not a view, an allocation or a no-op returning its input;
    an `F.rms_norm` counts once (one kernel on CUDA, decomposed on a CPU: `FusedNorms`)."""

    def __init__(self) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.ops: Counter[str] = Counter()
        self.inside_norm = False

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        name = func.overloadpacket.__name__
        if not self.inside_norm and name not in NOT_KERNELS and not (name[-1] != "_" and any(out is a for a in args)):
            self.ops[name] += 1
        return out


class FusedNorms(TorchFunctionMode):
    """Marks the span of each `F.rms_norm` call for `OpCounter`."""

    def __init__(self, counter: OpCounter) -> None:
        super().__init__()
        self.counter = counter

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if func not in (torch.rms_norm, torch.nn.functional.rms_norm) or self.counter.inside_norm:
            return func(*args, **(kwargs or {}))
        self.counter.inside_norm = True
        try:
            return func(*args, **(kwargs or {}))
        finally:
            self.counter.inside_norm = False
            self.counter.ops["rms_norm"] += 1


def count(rows: int, layers: int) -> Counter[str]:
    cfg = ModelConfig(vocab_size=512, hidden_size=256, intermediate_size=512, num_hidden_layers=layers,
                      num_attention_heads=8, num_key_value_heads=2, head_dim=64, max_position_embeddings=512,
                      attention="block", block_size=4, model_type="sdar")
    lm = Transformer(cfg).eval()
    lm.init_weights(generator=torch.Generator().manual_seed(0))
    cache = lm.new_static_cache(rows, 256)
    ids = torch.randint(0, 512, (rows, 8))
    positions = torch.arange(4, 12)
    cuda_form = transformer._fuses_norms
    transformer._fuses_norms = lambda device: True
    try:
        with torch.inference_mode():
            lm.static_forward(ids, positions, cache, slice(4, 8))  # lazy set-up outside the count
            counter = OpCounter()
            with counter, FusedNorms(counter):
                lm.static_forward(ids, positions, cache, slice(4, 8))
    finally:
        transformer._fuses_norms = cuda_form
    return counter.ops


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1)
    args = parser.parse_args()
    one, two = count(args.rows, 1), count(args.rows, 2)
    per_layer = two - one
    print(f"per layer: {sum(per_layer.values())} operations: " + ", ".join(
        f"{name} {n}" for name, n in sorted(per_layer.items(), key=lambda kv: -kv[1])))
    fixed = sum(one.values()) - sum(per_layer.values())
    print(f"per step outside the layers: {fixed}; a 36-layer step: {fixed + 36 * sum(per_layer.values())}")


if __name__ == "__main__":
    main()
