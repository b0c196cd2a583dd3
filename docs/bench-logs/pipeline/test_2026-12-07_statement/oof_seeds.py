"""The show filter's out-of-fold numbers per row set, mean of five seeds, each seed at its own threshold for 65%
precision on the suite's dev holes (the protocol of `dice_lsp.training.show_filter train`).

    python docs/bench-logs/pipeline/test_2026-12-07_statement/oof_seeds.py data/show-filter
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

from dice_lsp.completion.decide import Calibration
from dice_lsp.training import show_filter as sf

NAMES = ("dev", "corpus-valid", "idioms-dev")


def main(folder: str) -> None:
    tagged = [(name, row) for name in NAMES for row in sf.read_rows(Path(folder) / f"{name}.jsonl.gz")]
    rows = [row for _, row in tagged]
    found: dict[str, list[tuple[float, float, float]]] = {name: [] for name in NAMES}
    for seed in range(5):
        sf.PARAMS["seed"] = seed
        threshold = sf.train(rows, 0.65)["threshold"]
        candidates = [row for row in rows if row.features]
        raw = sf.out_of_fold(candidates)
        calibration = Calibration(*map(tuple, sf.isotonic(raw, [row.exact for row in candidates])))
        chances = iter(calibration(p) for p in raw)
        chance = [next(chances) if row.features else -1.0 for row in rows]
        for name in NAMES:
            chosen = [(row, c) for (n, row), c in zip(tagged, chance, strict=True) if n == name]
            point = sf.curve(sf.by_hole([r for r, _ in chosen], [c for _, c in chosen]), [threshold])[0]
            found[name].append((point.shown, point.precision, point.exact))
    for name in NAMES:
        shown, precision, exact = zip(*found[name], strict=True)
        print(f"{name}: shown {statistics.mean(shown):.3f} precision {statistics.mean(precision):.3f} "
              f"exact {statistics.mean(exact):.3f} (per seed {', '.join(f'{e:.3f}' for e in exact)})")


if __name__ == "__main__":
    main(sys.argv[1])
