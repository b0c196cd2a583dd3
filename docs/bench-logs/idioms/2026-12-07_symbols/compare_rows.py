"""The show filter's rows of two collections compared feature by feature: rows matched by hole and candidate text
(white space aside), per feature the rows whose value changed and a few examples, and the candidates only one side
has.

    python docs/bench-logs/idioms/2026-12-07_symbols/compare_rows.py data/show-filter /tmp/new-rows --examples 3
"""

from __future__ import annotations

import argparse
import math
from collections import defaultdict
from pathlib import Path

from dice_lsp.completion.features import FEATURES
from dice_lsp.training.show_filter import read_rows

SPLITS = ("dev", "corpus-valid", "idioms-dev")


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("old", type=Path)
    parser.add_argument("new", type=Path)
    parser.add_argument("--examples", type=int, default=3)
    args = parser.parse_args()
    for split in SPLITS:
        old = {(r.hole, " ".join(r.text.split())): r for r in read_rows(args.old / f"{split}.jsonl.gz") if r.features}
        new = {(r.hole, " ".join(r.text.split())): r for r in read_rows(args.new / f"{split}.jsonl.gz") if r.features}
        both = sorted(old.keys() & new.keys())
        print(f"## {split}: {len(old)} old rows, {len(new)} new rows, {len(both)} matched, "
              f"{len(old.keys() - new.keys())} only old, {len(new.keys() - old.keys())} only new")
        changed: dict[str, list[tuple[str, str, float, float]]] = defaultdict(list)
        for key in both:
            for i, name in enumerate(FEATURES):
                a, b = old[key].features[i], new[key].features[i]
                if not _same(a, b):
                    changed[name].append((key[0], key[1], a, b))
        for name in FEATURES:
            if name in changed:
                found = changed[name]
                print(f"- {name}: {len(found)} rows")
                for hole, text, a, b in found[:args.examples]:
                    print(f"    {hole} | {text[:90]!r} | {a} -> {b}")
        only = (("only old", sorted(old.keys() - new.keys())), ("only new", sorted(new.keys() - old.keys())))
        for side, keys in only:
            for hole, text in keys[:args.examples]:
                row = (old if side == "only old" else new)[(hole, text)]
                print(f"  {side}: {hole} | {row.source} | {text[:90]!r} | exact {row.exact}")
        exact_old = sum(r.exact for r in old.values())
        exact_new = sum(r.exact for r in new.values())
        print(f"  exact rows: {exact_old} -> {exact_new}")


if __name__ == "__main__":
    main()
