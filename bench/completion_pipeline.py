"""What each part of the completion pipeline is worth: the same holes through cumulative stages, side by side.

    python bench/completion_pipeline.py --split dev --kinds line midline --limit 100 --out docs/bench-logs/pipeline
    python bench/completion_pipeline.py ... --stages "checks off" "+entropy decoding (product)" \
        --model v2=old/dice-tiny --model v3=dice_lsp/models/dice-tiny     # checkpoints side by side

Stages (each adds one mechanism to the one before; `dice_lsp.complete.Pipeline`):
- `before`: one canvas, the five original filters, no checks: the first cleaned fill is shown (the product
  before the pipeline);
- `+filters`: the statement cut, bracket balance and neighbour-repeat filters;
- `+lengths`: line holes also fill the shorter canvases (`LINE_CANVASES`) in the same batch, best score first;
- `+checks`: parse and name checks rank the fills, and nothing is shown when none passes (suppression);
- `+remask`: a failing best fill has its offending spans re-masked and denoised again;
  (these five decode as the product did before the pipeline: low-confidence, 4 steps per 32 tokens)
- `+entropy decoding`: the entropy-bounded sampler with at most 8 steps (the product's decoding);
- `+clang front end`: the best fills are read by clang's front end too (`dice.typeCheck`; with no clang on the
  machine this stage equals the one before);
- `+document lines (product)`: the document's own line for a hole on one line, where its neighbours look like the
  hole's (`dice_lsp.completion.sources.document`), is a candidate too, ranked before the model's fills;
- `checks off`: the product's decoding and filters without the checks (every cleaned fill is shown): the
  model's raw fills, as a model comparison wants them;
- decoding variants of the full pipeline: more denoising steps per 32 canvas tokens, and the adaptive
  samplers (threshold, entropy-bounded) with a ceiling of steps; "model calls" is the mean per hole (the
  cost that does not depend on how busy the machine is).
Tune on `--split dev`; report on `test`. Every stage asks every hole on this machine's CPU one after
another (the editor path's latency); each stage's report goes to OUT/<stage>.json, the table to OUT/table.md.
Shown-parse and shown-compile are over the fills shown (compile: where the hole's file is compile-checked).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from tqdm import tqdm

from dice_lsp.complete import PRODUCT, Pipeline
from dice_lsp.cuda.checks import header_names
from dice_lsp.cuda.postprocess import (
    FILTERS,
    balance_braces,
    close_open_brackets,
    cut_suffix_repeat,
    drop_degenerate,
    fix_indentation,
    strip_retyped_word,
    strip_special_tokens,
)
from dice_lsp.engine import EMBEDDED_MODEL, load_model
from dice_lsp.evals import systems
from dice_lsp.evals.results import EvalReport
from dice_lsp.evals.run import compile_checked, evaluate
from dice_lsp.evals.stats import bootstrap
from dice_lsp.evals.suite import KINDS, load_suite
from dice_lsp.settings import Settings

ORIGINAL_FILTERS = (strip_special_tokens, cut_suffix_repeat, balance_braces, fix_indentation,
                    drop_degenerate)  # the filters before this pipeline
OLD_DECODING: dict[str, Any] = {"sampler": "low-confidence", "steps": 4}  # the default before the pipeline
NO_CLANG = replace(PRODUCT, front_end=False, document=False)  # the model's fills, without clang's check
STAGES: dict[str, tuple[Pipeline, dict[str, Any]]] = {
    "before": (Pipeline(ORIGINAL_FILTERS, lengths=False, checks=False, remask_rounds=0, document=False), OLD_DECODING),
    "+filters": (Pipeline(lengths=False, checks=False, remask_rounds=0, document=False), OLD_DECODING),
    "+lengths": (Pipeline(checks=False, remask_rounds=0, document=False), OLD_DECODING),
    "+checks": (Pipeline(remask_rounds=0, front_end=False, document=False), OLD_DECODING),
    "+remask": (NO_CLANG, OLD_DECODING),
    "+entropy decoding": (NO_CLANG, {}),
    "+clang front end": (replace(PRODUCT, document=False), {}),
    "+document lines (product)": (PRODUCT, {}),
    "+clang, no renames": (replace(PRODUCT, renames=False), {}),
    "+clang, no retyped-word strip or bracket close": (
        replace(PRODUCT, filters=tuple(f for f in FILTERS if f not in (strip_retyped_word, close_open_brackets))),
        {}),
    "+clang judges unknown names": (replace(PRODUCT, names_by_front_end=True), {}),
    "+clang, 2 re-mask rounds": (replace(PRODUCT, remask_rounds=2), {}),
    "+clang, re-mask ≤4 steps": (replace(PRODUCT, remask_steps=4), {}),
    "+clang, re-mask ≤3 steps": (replace(PRODUCT, remask_steps=3), {}),
    "+clang, re-mask ≤2 steps": (replace(PRODUCT, remask_steps=2), {}),
    "+clang, 4 sampled candidates": (PRODUCT, {"candidates": 4}),
    "checks off": (Pipeline(checks=False, remask_rounds=0, document=False), {}),
    "steps 6": (NO_CLANG, {"sampler": "low-confidence", "steps": 6}),
    "steps 8": (NO_CLANG, {"sampler": "low-confidence", "steps": 8}),
    "steps 16": (NO_CLANG, {"sampler": "low-confidence", "steps": 16}),
    "threshold 0.9, ≤8 steps": (NO_CLANG, {"steps": 8, "sampler": "threshold", "threshold": 0.9}),
    "threshold 0.7, ≤8 steps": (NO_CLANG, {"steps": 8, "sampler": "threshold", "threshold": 0.7}),
    "entropy 0.3, ≤8 steps": (NO_CLANG, {"steps": 8, "sampler": "entropy", "entropy_bound": 0.3}),
    "entropy 1, ≤8 steps": (NO_CLANG, {"steps": 8, "sampler": "entropy", "entropy_bound": 1.0}),
    "entropy 3, ≤8 steps": (NO_CLANG, {"steps": 8, "sampler": "entropy", "entropy_bound": 3.0}),
    "entropy 1, ≤16 steps": (NO_CLANG, {"steps": 16, "sampler": "entropy", "entropy_bound": 1.0}),
    "4 sampled candidates": (NO_CLANG, {**OLD_DECODING, "candidates": 4}),
    "4 sampled candidates, entropy 1, ≤8 steps": (NO_CLANG, {"candidates": 4}),
}


def pct(values: list[float]) -> str:
    if not values:
        return "n/a"
    interval = bootstrap(values)
    return f"{100 * interval.mean:.1f} [{100 * interval.low:.1f}, {100 * interval.high:.1f}] of {interval.n}"


def rows_of(stage: str, report: EvalReport) -> list[str]:
    """One table row per hole kind (and all kinds together) of one stage's report."""
    lines = []
    for kind in (*KINDS, "all"):
        fills = [f for f in report.fills if kind in ("all", f.kind)]
        if not fills or (kind == "all" and len({f.kind for f in fills}) < 2):
            continue
        scores = [f.score for f in fills]
        shown = [s for s in scores if s.shown]
        row = report.kinds[kind]
        similarity = row.similarity.mean if row.similarity else 0.0
        lines.append(" | ".join([
            stage, kind, str(len(fills)), pct([float(s.shown) for s in scores]),
            pct([float(s.exact_ws) for s in scores]), f"{similarity:.2f}",
            pct([float(s.parses) for s in shown]),
            pct([float(bool(s.compiles)) for s in shown if s.compiles is not None]),
            f"{sum(f.model_calls or 0 for f in fills) / len(fills):.1f}",
            f"{row.latency_p50_ms:.0f}", f"{row.latency_p95_ms:.0f}"]))
    return lines


HEADER = ("| model | stage | kind | holes | shown % | exact (ws) % | edit sim | shown: parse % | shown: compile % "
          "| model calls | p50 ms | p95 ms |\n|---|---|---|---|---|---|---|---|---|---|---|---|")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--split", default="dev", choices=("dev", "test"))
    parser.add_argument("--kinds", nargs="+", choices=KINDS, default=list(KINDS))
    parser.add_argument("--limit", type=int, help="first N holes of each kind")
    parser.add_argument("--compile-checked", action="store_true",
                        help="only holes whose file nvcc can judge (compiles alone, not a template)")
    parser.add_argument("--stages", nargs="+", choices=list(STAGES), default=list(STAGES))
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="auto",
                        help="auto (the product's choice: int8 products for an int8 checkpoint on the CPU), "
                             "float32, bfloat16")
    parser.add_argument("--model", action="append", default=[], metavar="NAME=DIR",
                        help="checkpoints to compare, each through every stage (default: the embedded model)")
    args = parser.parse_args()
    suite = load_suite("cuda-infill", args.split)
    holes = suite.select(args.kinds)
    if args.compile_checked:
        holes = [hole for hole in holes if compile_checked(suite, hole)]
    if args.limit is not None:
        holes = [h for kind in args.kinds for h in [h for h in holes if h.kind == kind][:args.limit]]
    if not holes:
        print("bench: no holes selected", file=sys.stderr)
        return 2
    header_names()  # built once per nvcc and cached, so no stage waits for it
    named = [item.split("=", 1) for item in args.model] or [["dice-tiny", str(EMBEDDED_MODEL)]]
    if any(len(item) != 2 or not Path(item[1]).is_dir() for item in named):
        print(f"bench: --model wants NAME=FOLDER with an existing folder, got {args.model}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    table = [HEADER]
    for name, folder in named:
        model = load_model(folder, args.device, args.dtype, False)
        for stage in args.stages:
            pipeline, changes = STAGES[stage]
            settings = replace(Settings(), **changes)
            system = systems.ModelSystem(stage, stage, model, settings, pipeline)
            with tqdm(total=len(holes), desc=f"{name}: {stage}", unit="hole", file=sys.stderr) as bar:
                report = evaluate(suite, holes, system, settings={"stage": stage, "model": name, **changes},
                                  progress=bar.update)
            stem = re.sub(r"[^0-9A-Za-z.]+", "_", stage.replace("+", "plus_")).strip("_")
            prefix = f"{name}_" if args.model else ""
            (args.out / f"{prefix}{stem}.json").write_text(json.dumps(report.to_json()))
            table += [f"| {name} | {line} |" for line in rows_of(stage, report)]
            print("\n".join(table[-(len(args.kinds) + 1):]), flush=True)
    (args.out / "table.md").write_text("\n".join(table) + "\n")
    print("\n".join(table))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
