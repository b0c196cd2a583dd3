"""The rules source alone (`dice_lsp.completion.sources.rules`), before any filter: every line a rule proposes at
the one-line holes of a split, against the hole's truth, counted per rule.

    python bench/rules_alone.py dev                        # a CUDA-Infill split (never `test`: it measures)
    python bench/rules_alone.py bench/idioms-dev --wrong   # a folder of marked kernels; list the wrong lines
    python bench/rules_alone.py data/corpus/valid.jsonl    # a corpus split's files, holes cut as for the filter

The holes and the names the code below needs are made as the product makes them (`evals.systems`,
`checks.context.CheckContext`); a line is right when it is the truth up to whitespace between tokens.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("split", help="a CUDA-Infill split, a folder of marked kernels or a corpus .jsonl")
    parser.add_argument("--wrong", action="store_true", help="list every wrong line beside its truth")
    parser.add_argument("--json", action="store_true", help="print the counts as JSON")
    args = parser.parse_args()
    if args.split == "test" or Path(args.split).resolve() == (Path(__file__).parent / "idioms").resolve():
        print(f"rules_alone: {args.split} measures the product; count on a dev set", file=sys.stderr)
        return 2

    from dice_lsp.completion.checks.context import CheckContext
    from dice_lsp.completion.sources import rules
    from dice_lsp.evals.marked import load_marked
    from dice_lsp.evals.suite import load_suite
    from dice_lsp.evals.systems import document_for, region_for
    from dice_lsp.training.show_filter import _same, corpus_suite

    split = Path(args.split)
    suite = (load_marked(split, compile_check=False) if split.is_dir() else
             corpus_suite(split) if args.split.endswith(".jsonl") else load_suite("cuda-infill", args.split))
    counts: Counter[tuple[str, bool]] = Counter()
    holes = 0
    for hole in suite.select(["line", "midline"], None):
        text = suite.text(hole)
        document = document_for(text, hole)
        region = region_for(document, hole)
        if region is None:
            continue
        holes += 1
        checker = CheckContext(document, region.start, region.end)
        truth = hole.truth(text)
        for found in rules.candidates(document[:region.start], document[region.end:], checker.needed,
                                      checker.request):
            right = _same(found.text, truth)
            counts[(found.rule, right)] += 1
            if args.wrong and not right:
                print(f"{hole.id}  {found.rule}: {found.text!r}  truth {truth.strip()!r}")
    table = {rule: {"right": counts[(rule, True)], "wrong": counts[(rule, False)]} for rule in rules.RULES}
    if args.json:
        print(json.dumps({"split": args.split, "holes": holes, "rules": table}))
        return 0
    print(f"{args.split}: {holes} holes")
    for rule, tally in table.items():
        if tally["right"] or tally["wrong"]:
            print(f"  {rule:14} {tally['right']:4} right {tally['wrong']:4} wrong")
    print(f"  {'all':14} {sum(t['right'] for t in table.values()):4} right "
          f"{sum(t['wrong'] for t in table.values()):4} wrong")
    return 0


if __name__ == "__main__":
    sys.exit(main())
