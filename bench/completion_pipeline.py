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
- `+document lines`: the document's own line for a hole on one line, where its neighbours look like the
  hole's (`dice_lsp.completion.sources.document`), is a candidate too, ranked before the model's fills;
- `+sources and show filter (product)`: every source proposes (the document, the workspace: the other files of
  the hole's project, `--no-twins` without parallel copies; the idiom bank; a run's next line) and the model's
  show filter ranks the candidates and shows the best only at P(right) >= its threshold
  (`dice_lsp.completion.decide`);
- `+sources, every candidate (P >= 0)`: the same with `dice.minConfidence` 0: what the filter would show at any
  threshold; its report keeps each shown fill's P, from which `--curve` draws precision against show rate;
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
from dice_lsp.completion.sources import Source
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
from dice_lsp.evals.results import EvalReport, FillRow
from dice_lsp.evals.run import compile_checked, evaluate
from dice_lsp.evals.stats import bootstrap
from dice_lsp.evals.suite import KINDS, SuiteHole, load_suite
from dice_lsp.evals.workspaces import workspace_for
from dice_lsp.settings import Settings
from dice_lsp.toolchain.header_index import header_names

ORIGINAL_FILTERS = (strip_special_tokens, cut_suffix_repeat, balance_braces, fix_indentation,
                    drop_degenerate)  # the filters before this pipeline
OLD_DECODING: dict[str, Any] = {"sampler": "low-confidence", "steps": 4}  # the default before the pipeline
# the model's fills alone, as the product made them before other sources proposed
MODEL_ONLY = replace(PRODUCT, document=False, analogue=False, rules=False, workspace=False, idioms=False, decide=False)
NO_CLANG = replace(MODEL_ONLY, front_end=False)  # the model's fills, without clang's check
DOCUMENT = replace(MODEL_ONLY, document=True)  # and the document's strong lines (the product of 2026-12-06)
STAGES: dict[str, tuple[Pipeline, dict[str, Any]]] = {
    "before": (replace(NO_CLANG, filters=ORIGINAL_FILTERS, lengths=False, checks=False, remask_rounds=0), OLD_DECODING),
    "+filters": (replace(NO_CLANG, lengths=False, checks=False, remask_rounds=0), OLD_DECODING),
    "+lengths": (replace(NO_CLANG, checks=False, remask_rounds=0), OLD_DECODING),
    "+checks": (replace(NO_CLANG, remask_rounds=0), OLD_DECODING),
    "+remask": (NO_CLANG, OLD_DECODING),
    "+entropy decoding": (NO_CLANG, {}),
    "+clang front end": (MODEL_ONLY, {}),
    "+document lines": (DOCUMENT, {}),
    "+sources and show filter (product)": (PRODUCT, {}),
    "product, similar lines in context": (replace(PRODUCT, similar_context=2), {}),
    "every candidate (P >= 0), similar lines in context": (replace(PRODUCT, similar_context=2),
                                                            {"min_confidence": 0.0}),
    "+clang front end, similar lines in context": (replace(MODEL_ONLY, similar_context=2), {}),
    "+sources, every candidate (P >= 0)": (PRODUCT, {"min_confidence": 0.0}),
    "+clang, no renames": (replace(MODEL_ONLY, renames=False), {}),
    "+clang, no retyped-word strip or bracket close": (
        replace(MODEL_ONLY, filters=tuple(f for f in FILTERS if f not in (strip_retyped_word, close_open_brackets))),
        {}),
    "+clang judges unknown names": (replace(MODEL_ONLY, names_by_front_end=True), {}),
    "+clang, 2 re-mask rounds": (replace(MODEL_ONLY, remask_rounds=2), {}),
    "+clang, re-mask ≤4 steps": (replace(MODEL_ONLY, remask_steps=4), {}),
    "+clang, re-mask ≤3 steps": (replace(MODEL_ONLY, remask_steps=3), {}),
    "+clang, re-mask ≤2 steps": (replace(MODEL_ONLY, remask_steps=2), {}),
    "+clang, 4 sampled candidates": (MODEL_ONLY, {"candidates": 4}),
    "checks off": (replace(MODEL_ONLY, checks=False, remask_rounds=0), {}),
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


def completed(fills: list[FillRow], lengths: dict[str, int]) -> float:
    """Characters of the exact shown fills over characters of all the holes' truths (the code the product wrote
    for the user)."""
    total = sum(lengths[f.hole] for f in fills) or 1
    return sum(lengths[f.hole] for f in fills if f.score.shown and f.score.exact_ws) / total


def rows_of(stage: str, report: EvalReport, lengths: dict[str, int]) -> list[str]:
    """One table row per hole kind (and all kinds together) of one stage's report; `lengths`: each hole's truth
    length in characters."""
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
            pct([float(s.exact_ws) for s in scores]), pct([float(s.exact_ws) for s in shown]),
            f"{100 * completed(fills, lengths):.1f}", f"{similarity:.2f}",
            pct([float(s.parses) for s in shown]),
            pct([float(bool(s.compiles)) for s in shown if s.compiles is not None]),
            f"{sum(f.model_calls or 0 for f in fills) / len(fills):.1f}",
            f"{row.latency_p50_ms:.0f}", f"{row.latency_p95_ms:.0f}"]))
    return lines


HEADER = ("| model | stage | kind | holes | shown % | exact (ws) % | precision of shown % | completed code % "
          "| edit sim | shown: parse % | shown: compile % | model calls | p50 ms | p95 ms |\n"
          "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")


def risk_coverage(report: EvalReport, lengths: dict[str, int]) -> list[dict[str, float]]:
    """Precision of shown against show rate as the threshold on the shown fill's P(right) rises (a report made
    at `dice.minConfidence` 0): one point per distinct P."""
    fills = report.fills
    points = []
    for threshold in sorted({0.0, *(f.confidence for f in fills if f.confidence is not None)}):
        shown = [f for f in fills if f.score.shown and (f.confidence is None or f.confidence >= threshold)]
        right = [f for f in shown if f.score.exact_ws]
        points.append({"threshold": threshold, "shown": len(shown) / len(fills),
                       "precision": len(right) / len(shown) if shown else float("nan"),
                       "exact": len(right) / len(fills),
                       "completed": sum(lengths[f.hole] for f in right) / (sum(lengths.values()) or 1)})
    return points


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
    parser.add_argument("--no-twins", action="store_true",
                        help="the workspace leaves out parallel copies of the file (cuda/rocm twins)")
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
    lengths = {hole.id: hole.end - hole.start for hole in holes}
    twins = not args.no_twins

    def workspace(hole: SuiteHole) -> tuple[Source, ...]:
        return (workspace_for(hole.file, args.split, twins=twins),)

    table = [HEADER]
    for name, folder in named:
        model = load_model(folder, args.device, args.dtype, False)
        for stage in args.stages:
            pipeline, changes = STAGES[stage]
            settings = replace(Settings(), **changes)
            system = systems.ModelSystem(stage, stage, model, settings, pipeline, workspace=workspace)
            with tqdm(total=len(holes), desc=f"{name}: {stage}", unit="hole", file=sys.stderr) as bar:
                report = evaluate(suite, holes, system, settings={"stage": stage, "model": name, **changes},
                                  progress=bar.update)
            stem = re.sub(r"[^0-9A-Za-z.]+", "_", stage.replace("+", "plus_")).strip("_")
            prefix = f"{name}_" if args.model else ""
            (args.out / f"{prefix}{stem}.json").write_text(json.dumps(report.to_json()))
            if any(f.confidence is not None for f in report.fills):
                curve = {kind: risk_coverage(replace(report, fills=[f for f in report.fills if f.kind == kind]),
                                             {h.id: lengths[h.id] for h in holes if h.kind == kind})
                         for kind in args.kinds}
                (args.out / f"{prefix}{stem}.curve.json").write_text(json.dumps(curve))
            table += [f"| {name} | {line} |" for line in rows_of(stage, report, lengths)]
            print("\n".join(table[-(len(args.kinds) + 1):]), flush=True)
    (args.out / "table.md").write_text("\n".join(table) + "\n")
    print("\n".join(table))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
