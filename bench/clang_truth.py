"""clang's front-end verdict on the true fills of a split (every kind): how often the check would withdraw what the
author wrote. `python bench/clang_truth.py --split dev` (tune on dev).

`--files PATH ...` asks the same of real files the suite does not hold (their headers often missing here): per
file, `--per-file` random statement lines emptied (as `bench/real_code.py`'s `emptied` requests), the author's
line judged against the file without it, with a patient check (no editor time bounds)."""

from __future__ import annotations

import argparse
import random
import sys
from collections import Counter
from pathlib import Path

from dice_lsp.evals.suite import load_suite
from dice_lsp.evals.systems import document_for
from dice_lsp.toolchain.clang import clang_judge
from dice_lsp.toolchain.flags import CompileFlags


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", default="dev", choices=("dev", "test"))
    parser.add_argument("--files", nargs="+", type=Path, help="real .cu/.cuh files instead of the suite")
    parser.add_argument("--per-file", type=int, default=3)
    args = parser.parse_args()
    if args.files:
        return real_files(args.files, args.per_file)
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


def real_files(paths: list[Path], per_file: int) -> int:
    rng = random.Random(1)
    counts: Counter[bool | None] = Counter()
    for path in paths:
        text = path.read_text(errors="replace")
        lines = text.split("\n")
        statements = [i for i, line in enumerate(lines) if line.strip().endswith(";") and line.startswith((" ", "\t"))
                      and not line.strip().startswith(("//", "*", "#"))]
        for i in rng.sample(statements, min(per_file, len(statements))):
            indent = lines[i][:len(lines[i]) - len(lines[i].lstrip())]
            judge = clang_judge("\n".join([*lines[:i], indent, *lines[i + 1:]]), path.parent, CompileFlags(),
                                patient=True)
            if judge is None:
                print("bench: no clang that reads the CUDA headers here")
                return 2
            verdict = judge(text)
            counts[verdict] += 1
            if verdict is False:
                print(f"{path}:{i + 1}: rejects {lines[i].strip()!r}: {judge.new_errors(text)}", file=sys.stderr)
    print(f"{len(paths)} files: {counts[True]} pass, {counts[False]} rejected, {counts[None]} no verdict")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
