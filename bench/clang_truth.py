"""clang's front-end verdict on the true fills of a split (every kind): how often the check would withdraw what the
author wrote. `python bench/clang_truth.py --split dev` (tune on dev)."""

from __future__ import annotations

import argparse
from collections import Counter

from dice_lsp.evals.suite import load_suite
from dice_lsp.evals.systems import document_for
from dice_lsp.toolchain.clang import clang_judge
from dice_lsp.toolchain.flags import CompileFlags


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", default="dev", choices=("dev", "test"))
    args = parser.parse_args()
    suite = load_suite(split=args.split)
    counts: Counter[tuple[str, bool | None]] = Counter()
    for hole in suite.holes:
        text = suite.text(hole)
        judge = clang_judge(document_for(text, hole), None, CompileFlags())
        if judge is None:
            print("bench: no clang that reads the CUDA headers here")
            return 2
        verdict = judge(text)
        counts[(hole.kind, verdict)] += 1
        if verdict is False:
            print(f"{hole.id}: rejects {hole.truth(text)!r}: {judge.new_errors(text)}")
    print("| kind | passes | rejected | no verdict |\n|---|---|---|---|")
    for kind in sorted({k for k, _ in counts}):
        print(f"| {kind} | {counts[(kind, True)]} | {counts[(kind, False)]} | {counts[(kind, None)]} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
