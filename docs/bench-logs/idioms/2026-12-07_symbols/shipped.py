"""The shipped show filter (dice-tiny/show_filter.json) on a folder's rows, per set: at its stored threshold, the
share of holes shown, the precision of shown and the exact share of holes. On the rows it was trained on this is
in sample (optimistic); on rows collected after a feature change it is what the product now does with it.

    python docs/bench-logs/idioms/2026-12-07_symbols/shipped.py data/show-filter /tmp/new-rows
"""

from __future__ import annotations

import argparse
from pathlib import Path

from dice_lsp.completion.decide import show_filter
from dice_lsp.engine import EMBEDDED_MODEL
from dice_lsp.training.show_filter import by_hole, curve, read_rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("folders", type=Path, nargs="+")
    args = parser.parse_args()
    found = show_filter(Path(EMBEDDED_MODEL))
    assert found is not None
    for folder in args.folders:
        for name in ("dev", "idioms-dev"):
            rows = read_rows(folder / f"{name}.jsonl.gz")
            candidates = [r for r in rows if r.features]
            chances = iter(found.probabilities([r.features for r in candidates]))
            p = curve(by_hole(rows, [next(chances) if r.features else -1.0 for r in rows]), [found.threshold])[0]
            print(f"{folder} {name}: threshold {found.threshold:.4f}, shown {100 * p.shown:.1f}%, precision "
                  f"{100 * p.precision:.1f}%, exact {100 * p.exact:.1f}%")


if __name__ == "__main__":
    main()
