"""The show filter's out-of-fold numbers of a folder of rows, per set: trained as `show_filter train` trains it
(dev + corpus-valid + idioms-dev, five folds by file, isotonic calibration, the smallest threshold whose precision
of shown on the dev and idioms-dev holes reaches the target), then at that threshold the share of holes shown, the
precision of shown and the exact share of holes on the dev holes and on the idioms-dev holes apart.

    python docs/bench-logs/idioms/2026-12-07_symbols/out_of_fold.py data/show-filter /tmp/new-rows
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from dice_lsp.completion.decide import Calibration
from dice_lsp.training.show_filter import Row, by_hole, curve, isotonic, out_of_fold, read_rows

SETS = ("dev", "corpus-valid", "idioms-dev")


def numbers(folder: Path, target: float) -> str:
    rows: list[Row] = []
    owner: dict[str, str] = {}
    for name in SETS:
        found = read_rows(folder / f"{name}.jsonl.gz")
        owner.update((r.hole, name) for r in found)
        rows += found
    candidates = [r for r in rows if r.features]
    raw = out_of_fold(candidates)
    calibration = Calibration(*map(tuple, isotonic(raw, [r.exact for r in candidates])))
    calibrated = iter(calibration(p) for p in raw)
    chances = [next(calibrated) if r.features else -1.0 for r in rows]
    on_dev = [(r, c) for r, c in zip(rows, chances, strict=True) if not r.file.startswith("corpus/")]
    thresholds = sorted({round(c, 4) for c in chances if c >= 0} | {0.0})
    points = curve(by_hole([r for r, _ in on_dev], [c for _, c in on_dev]), thresholds)
    reaching = [p for p in points if not math.isnan(p.precision) and p.precision >= target and p.shown > 0]
    chosen = min(reaching, key=lambda p: p.threshold) if reaching else max(points, key=lambda p: p.threshold)
    lines = [f"{folder}: threshold {chosen.threshold:.4f} (dev + idioms-dev holes: shown {100 * chosen.shown:.1f}%, "
             f"precision {100 * chosen.precision:.1f}%, exact {100 * chosen.exact:.1f}%)"]
    for name in ("dev", "idioms-dev"):
        mine = [(r, c) for r, c in on_dev if owner[r.hole] == name]
        point = curve(by_hole([r for r, _ in mine], [c for _, c in mine]), [chosen.threshold])[0]
        holes = len({r.hole for r, _ in mine})
        lines.append(f"  {name} ({holes} holes): shown {100 * point.shown:.1f}%, precision "
                     f"{100 * point.precision:.1f}%, exact {100 * point.exact:.1f}%")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("folders", type=Path, nargs="+")
    parser.add_argument("--precision", type=float, default=0.65)
    args = parser.parse_args()
    for folder in args.folders:
        print(numbers(folder, args.precision))


if __name__ == "__main__":
    main()
