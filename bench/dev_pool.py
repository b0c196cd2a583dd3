"""A larger dev tuning set: every line / mid-line hole of the dev split's files that nvcc compiles alone (not only
the suite's sample of them), through one stage of the completion pipeline; shown fills compiled with nvcc.

    python bench/dev_pool.py --kinds line midline --limit 400 --stage "+document lines (product)" --out OUT.json
    (--model FOLDER: another checkpoint than the embedded one)

Dev files only: tune here, report on the test split (bench/completion_pipeline.py --split test).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from dataclasses import replace
from pathlib import Path

from completion_pipeline import STAGES, rows_of
from tqdm import tqdm

from dice_lsp.engine import EMBEDDED_MODEL, load_model
from dice_lsp.evals import systems
from dice_lsp.evals.results import HoleRow
from dice_lsp.evals.run import evaluate
from dice_lsp.evals.suite import Suite, SuiteHole, load_suite
from dice_lsp.settings import Settings
from dice_lsp.toolchain.header_index import header_names
from dice_lsp.training.suite_build import cut_holes


def pool(kinds: list[str], limit: int) -> Suite:
    """The dev files nvcc compiles alone, with every hole of `kinds` the suite builder would cut (shuffled,
    the first `limit` new ones) and the suite's own holes there."""
    dev = load_suite(split="dev")
    files = {key: f for key, f in dev.files.items() if f.compiles}
    existing = {(h.file, h.start, h.end) for h in dev.holes}
    holes: list[SuiteHole] = []
    rng = random.Random(7)
    for key, f in sorted(files.items()):
        for kind, start, end, function, template in cut_holes(f.text, rng):
            if kind in kinds and not template and (key, start, end) not in existing:
                holes.append(SuiteHole(f"{kind}/p{len(holes):05d}", kind, key, start, end, function, template,
                                       f.launch))
    random.Random(1).shuffle(holes)
    holes = holes[:limit] + [h for h in dev.holes if h.kind in kinds and h.file in files and not h.template]
    return Suite("cuda-infill", "dev", files, holes)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kinds", nargs="+", default=["line", "midline"])
    parser.add_argument("--limit", type=int, default=400, help="new holes at most (besides the suite's own)")
    parser.add_argument("--stage", choices=list(STAGES), default="+document lines (product)")
    parser.add_argument("--model", type=Path, default=EMBEDDED_MODEL, help="model folder (default: the embedded one)")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    suite = pool(args.kinds, args.limit)
    print(f"{len(suite.holes)} holes", file=sys.stderr)
    header_names()
    model = load_model(args.model, "cpu", "auto", False)
    pipeline, changes = STAGES[args.stage]
    settings = replace(Settings(), **changes)
    system = systems.ModelSystem(args.stage, args.stage, model, settings, pipeline)
    with tqdm(total=len(suite.holes), file=sys.stderr) as bar:
        report = evaluate(suite, suite.holes, system, settings={"stage": args.stage}, progress=bar.update)
    report = replace(report, hole_rows=[HoleRow(h.id, h.kind, h.file, h.start, h.end) for h in suite.holes])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report.to_json()))
    print("\n".join(rows_of(args.stage, report)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
