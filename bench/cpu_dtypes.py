"""The embedded model on this CPU, per way of computing it: fp32, bf16, int8 products — side by side, one run.

    python bench/cpu_dtypes.py [--model NAME=DIR ...] [--repeats 10] [--holes 24] [--json FILE]

For each checkpoint (default: the embedded one) and each compute mode, the time of one denoising call
(batch 1 and 4, 256 context tokens + a 32-token canvas: the editor's one-line request), the share of
positions whose top token equals fp32's on a real CUDA file (examples/vector_add.cu plus the repo's
problem kernels), and over `--holes` held-out holes (bench/lsp_latency.py's, editor defaults) the median
time of a whole fill and how many fills have fp32's texts. An int8 checkpoint's fp32 and bf16 rows are its
dequantized weights; "apart" runs int8 products with q/k/v and gate/up as separate products, as before
`quant.fuse_int8` joined them (same outputs, bit for bit). Rows are interleaved per repeat (and per hole) so
a busy machine slows all of them alike; the medians are reported.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

import torch

from dice_lsp.engine import EMBEDDED_MODEL, load_model
from dice_lsp.engine.model import LoadedModel

ROOT = Path(__file__).resolve().parents[1]
MODES = {"fp32": "float32", "bf16": "bfloat16", "int8 products": "int8",
         "int8 products, q/k/v and gate/up apart": "int8"}  # the product before `quant.fuse_int8` joined them


def corpus_ids(model: LoadedModel, length: int = 288) -> torch.Tensor:
    files = [ROOT / "examples" / "vector_add.cu", *sorted((ROOT / "bench" / "problems").rglob("*.cu"))[:7]]
    rows = []
    for path in files:
        ids = model.tokenizer.encode(path.read_text(encoding="utf-8"))
        if len(ids) >= length:
            rows.append(ids[:length])
    return torch.tensor(rows)


def load(folder: str, mode: str) -> LoadedModel:
    model = load_model(folder, "cpu", MODES[mode])
    if mode.endswith("apart"):
        for module in model.lm.modules():  # type: ignore[attr-defined]
            for joined in ("qkv_int8", "gate_up_int8"):
                if getattr(module, joined, None) is not None:
                    setattr(module, joined, None)
    return model


def fills(models: dict[str, LoadedModel], count: int) -> tuple[dict[str, float], dict[str, int], int]:
    """Per mode: the median ms of a fill of each held-out hole, and how many fills equal fp32's; the holes."""
    if count <= 0:
        return {}, {}, 0
    import sys

    sys.path.insert(0, str(ROOT / "bench"))
    from lsp_latency import fill_requests

    from dice_lsp.engine import fill

    requests = fill_requests(models["fp32"], count, seed=5)
    for model in models.values():
        fill(model, requests[0])  # first-call costs
    ms: dict[str, list[float]] = {mode: [] for mode in models}
    same = dict.fromkeys(models, 0)
    for request in requests:
        texts = {}
        for mode, model in models.items():
            started = time.perf_counter()
            texts[mode] = fill(model, request).texts
            ms[mode].append(1000 * (time.perf_counter() - started))
        for mode in models:
            same[mode] += texts[mode] == texts["fp32"]
    return {mode: statistics.median(v) for mode, v in ms.items()}, same, len(requests)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", action="append", default=[], metavar="NAME=DIR")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--holes", type=int, default=24, help="held-out holes to fill per mode (0: none)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    torch.set_num_threads(max(1, torch.get_num_threads()))
    named = [item.split("=", 1) for item in args.model] or [["dice-tiny", str(EMBEDDED_MODEL)]]
    rows: list[dict[str, Any]] = []
    print("| model | compute | ms per call, batch 1 | ms per call, batch 4 | top-1 = fp32's | ms per fill (p50) "
          "| fills = fp32's |\n|---|---|---|---|---|---|---|")
    for name, folder in named:
        models = {mode: load(folder, mode) for mode in MODES}
        texts = corpus_ids(models["fp32"])
        with torch.inference_mode():
            reference = models["fp32"].lm(texts).argmax(-1)
            agree = {mode: float((m.lm(texts).argmax(-1) == reference).float().mean()) for mode, m in models.items()}
            times: dict[tuple[str, int], list[float]] = {(mode, b): [] for mode in MODES for b in (1, 4)}
            for repeat in range(args.repeats + 1):
                for mode, model in models.items():
                    for batch in (1, 4):
                        ids = texts[:batch].repeat((batch + len(texts) - 1) // len(texts), 1)[:batch]
                        started = time.perf_counter()
                        model.lm(ids, only=slice(256, 288))
                        if repeat:  # the first round warms up
                            times[(mode, batch)].append(1000 * (time.perf_counter() - started))
        fill_ms, same, holes = fills(models, args.holes)
        for mode in MODES:
            row = {"model": name, "compute": mode, "batch1_ms": statistics.median(times[(mode, 1)]),
                   "batch4_ms": statistics.median(times[(mode, 4)]), "top1_agreement": agree[mode],
                   "fill_ms": fill_ms.get(mode), "fills_equal_fp32": same.get(mode), "holes": holes}
            rows.append(row)
            per_fill = f"{fill_ms[mode]:.0f} | {same[mode]} of {holes}" if holes else "– | –"
            print(f"| {name} | {mode} | {row['batch1_ms']:.0f} | {row['batch4_ms']:.0f} | {100 * agree[mode]:.1f}% "
                  f"| {per_fill} |", flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
