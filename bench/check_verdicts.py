"""The completion checks' verdicts on true code, written out so that a change to the checks can be compared with
what they said before: every line and mid-line hole the split's files give (`suite_build.cut_holes`, seed 0,
judged as the editor asks: the truth typed at an empty region) and every suite hole of the split (judged with
the region's text replaced, and at an empty region), each with its truth and with a wrong fill (the line two
lines below, a neighbouring line as the model often writes it). Per fill: both verdicts, every rule's findings,
the spans re-masking gets; per hole: the names the code below needs and the names in scope.

    python bench/check_verdicts.py --split dev --out /tmp/verdicts.jsonl
    python bench/check_verdicts.py --compare /tmp/before.jsonl /tmp/after.jsonl
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

from dice_lsp.completion.checks.context import CheckContext
from dice_lsp.evals.suite import load_suite
from dice_lsp.toolchain.header_index import fallback_names
from dice_lsp.training.suite_build import cut_holes

HEADERS = fallback_names()  # the shipped index: the same names on every machine


def _neighbour(text: str, end: int) -> str:
    """The line two lines below the hole's (the first non-blank of the next few), stripped."""
    for line in text[end:].split("\n")[2:6]:
        if line.strip():
            return line.strip()
    return "x = y;"


def _verdict(checks: CheckContext, fill: str) -> dict[str, Any]:
    both = checks.check(fill)
    return {"p": both.parses, "n": both.names, "u": checks.unknown_names(fill), "d": checks.undeclared(fill),
            "r": checks.redeclared(fill), "a": checks.wrong_arity(fill), "f": checks.faults(fill),
            "e": checks.error_spans(fill), "decl": checks.declarations(fill)}


def _record(key: str, text: str, start: int, end: int, empty: bool) -> dict[str, Any]:
    checks = (CheckContext(text[:start] + text[end:], start, start, HEADERS) if empty
              else CheckContext(text, start, end, HEADERS))
    scope = hashlib.sha1(" ".join(sorted(checks.names_in_scope)).encode()).hexdigest()[:12]
    return {"k": key, "truth": _verdict(checks, text[start:end]), "wrong": _verdict(checks, _neighbour(text, end)),
            "needed": sorted(checks.needed), "scope": scope}


def write(split: str, out: Path) -> dict[str, int]:
    """Every verdict of the split, one JSON line per hole; the counts of truths rejected."""
    suite = load_suite(split=split)
    began = time.monotonic()
    counts = {"truths": 0, "truths_rejected": 0, "suite": 0, "suite_rejected": 0}
    with out.open("w") as lines:
        rng = random.Random(0)
        for key, file in suite.files.items():
            for kind, start, end, _function, _template in cut_holes(file.text, rng):
                if kind in ("line", "midline"):
                    row = _record(f"{key}:{kind}:{start}:{end}", file.text, start, end, True)
                    lines.write(json.dumps(row) + "\n")
                    counts["truths"] += 1
                    counts["truths_rejected"] += not (row["truth"]["p"] and row["truth"]["n"])
        for hole in suite.holes:
            row = _record(f"suite:{hole.id}", suite.text(hole), hole.start, hole.end, False)
            lines.write(json.dumps(row) + "\n")
            lines.write(json.dumps(_record(f"suite-empty:{hole.id}", suite.text(hole), hole.start, hole.end, True))
                        + "\n")
            counts["suite"] += 1
            counts["suite_rejected"] += not (row["truth"]["p"] and row["truth"]["n"])
    counts["seconds"] = round(time.monotonic() - began)
    return counts


def _comparable(verdict: dict[str, Any]) -> dict[str, Any]:
    """A fill's verdict with its spans as sets (their order and repeats say nothing)."""
    return {**verdict, "e": sorted({tuple(s) for s in verdict["e"]}), "f": sorted({tuple(s) for s in verdict["f"]})}


def compare(before: Path, after: Path) -> int:
    """Print every difference between two runs, by field; 1 when there is any."""
    old = {row["k"]: row for row in map(json.loads, before.open())}
    new = {row["k"]: row for row in map(json.loads, after.open())}
    differences: dict[str, list[str]] = {}
    for key in old.keys() | new.keys():
        if key not in old or key not in new:
            differences.setdefault("hole only in one run", []).append(key)
            continue
        for part in ("truth", "wrong"):
            a, b = _comparable(old[key][part]), _comparable(new[key][part])
            for field in a.keys() | b.keys():
                if a.get(field) != b.get(field):
                    differences.setdefault(f"{part}.{field}", []).append(f"{key}: {a.get(field)} -> {b.get(field)}")
        for field in ("needed", "scope"):
            if old[key][field] != new[key][field]:
                differences.setdefault(field, []).append(f"{key}: {old[key][field]} -> {new[key][field]}")
    print(f"{len(old)} holes before, {len(new)} after; {sum(map(len, differences.values()))} differences")
    for field, rows in sorted(differences.items()):
        print(f"{field}: {len(rows)}")
        for row in rows[:10]:
            print(f"    {row[:300]}")
    return 1 if differences else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", default="dev", choices=("dev", "test"))
    parser.add_argument("--out", type=Path, help="write the verdicts here (JSON lines)")
    parser.add_argument("--compare", nargs=2, type=Path, metavar=("BEFORE", "AFTER"))
    args = parser.parse_args()
    if args.compare:
        return compare(*args.compare)
    if args.out is None:
        parser.error("--out or --compare")
    print(json.dumps(write(args.split, args.out)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
