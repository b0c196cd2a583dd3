"""The embedded model on this CPU, per way of computing it: fp32, bf16, int8 products — side by side, one run.

    python bench/cpu_dtypes.py [--model NAME=DIR ...] [--repeats 10] [--json FILE]

For each checkpoint (default: the embedded one) and each compute mode, the time of one denoising call
(batch 1 and 4, 256 context tokens + a 32-token canvas: the editor's one-line request) and the share of
positions whose top token equals fp32's on a real CUDA file (examples/vector_add.cu plus the repo's
problem kernels). An int8 checkpoint's fp32 and bf16 rows are its dequantized weights. Rows are interleaved
per repeat so a busy machine slows all of them alike; the medians are reported.
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
MODES = {"fp32": "float32", "bf16": "bfloat16", "int8 products": None}


def corpus_ids(model: LoadedModel, length: int = 288) -> torch.Tensor:
    files = [ROOT / "examples" / "vector_add.cu", *sorted((ROOT / "bench" / "problems").rglob("*.cu"))[:7]]
    rows = []
    for path in files:
        ids = model.tokenizer.encode(path.read_text(encoding="utf-8"))
        if len(ids) >= length:
            rows.append(ids[:length])
    return torch.tensor(rows)


def load(folder: str, mode: str) -> LoadedModel:
    dtype = MODES[mode]
    if dtype is None:
        model = load_model(folder, "cpu")
        if not model.int8:
            from dice_lsp.engine.quant import int8_linears

            model.lm = int8_linears(model.lm)  # type: ignore[type-var]
            model.int8 = True
        return model
    return load_model(folder, "cpu", dtype)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", action="append", default=[], metavar="NAME=DIR")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    torch.set_num_threads(max(1, torch.get_num_threads()))
    named = [item.split("=", 1) for item in args.model] or [["dice-tiny", str(EMBEDDED_MODEL)]]
    rows: list[dict[str, Any]] = []
    print("| model | compute | ms per call, batch 1 | ms per call, batch 4 | top-1 = fp32's |\n|---|---|---|---|---|")
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
        for mode in MODES:
            row = {"model": name, "compute": mode, "batch1_ms": statistics.median(times[(mode, 1)]),
                   "batch4_ms": statistics.median(times[(mode, 4)]), "top1_agreement": agree[mode]}
            rows.append(row)
            print(f"| {name} | {mode} | {row['batch1_ms']:.0f} | {row['batch4_ms']:.0f} | {100 * agree[mode]:.1f}% |",
                  flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
