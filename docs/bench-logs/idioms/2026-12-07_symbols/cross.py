"""The old filter on the new features, out of fold: per fold, a booster trained on the old rows of the other folds'
files predicts the new rows of this fold's files; calibrated and thresholded as the old filter was (isotonic on the
old rows' out-of-fold predictions, the smallest threshold reaching the target there). What the product does when
the features change and the filter is not retrained. Per seed of the booster, beside old on old and new on new.

    python docs/bench-logs/idioms/2026-12-07_symbols/cross.py data/show-filter /tmp/new-rows --seeds 5
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np

import dice_lsp.training.show_filter as sf
from dice_lsp.completion.decide import Calibration

SETS = ("dev", "corpus-valid", "idioms-dev")


def _rows(folder: Path) -> tuple[list[sf.Row], dict[str, str]]:
    rows: list[sf.Row] = []
    owner: dict[str, str] = {}
    for name in SETS:
        found = sf.read_rows(folder / f"{name}.jsonl.gz")
        owner.update((r.hole, name) for r in found)
        rows += found
    return rows, owner


def _predicted(train: list[sf.Row], test: list[sf.Row]) -> list[float]:
    """Each candidate row of `test`'s raw P from boosters trained on `train`'s rows of the other folds."""
    train_folds, test_folds = sf._folds(train), sf._folds(test)
    out = [math.nan] * len(test)
    for fold in range(sf.FOLDS):
        booster = sf._fit([r for r, f in zip(train, train_folds, strict=True) if f != fold])
        index = [i for i, f in enumerate(test_folds) if f == fold]
        if index:
            values = booster.predict(np.asarray([test[i].features for i in index], dtype=np.float64))
            for i, value in zip(index, values, strict=True):
                out[i] = float(value)
    return out


def _chosen(rows: list[sf.Row], chances: list[float], target: float) -> float:
    on_dev = [(r, c) for r, c in zip(rows, chances, strict=True) if not r.file.startswith("corpus/")]
    thresholds = sorted({round(c, 4) for c in chances if c >= 0} | {0.0})
    points = sf.curve(sf.by_hole([r for r, _ in on_dev], [c for _, c in on_dev]), thresholds)
    reaching = [p for p in points if not math.isnan(p.precision) and p.precision >= target and p.shown > 0]
    return (min(reaching, key=lambda p: p.threshold) if reaching else max(points, key=lambda p: p.threshold)).threshold


def _at(rows: list[sf.Row], chances: list[float], owner: dict[str, str], threshold: float, name: str) -> str:
    mine = [(r, c) for r, c in zip(rows, chances, strict=True) if owner[r.hole] == name]
    p = sf.curve(sf.by_hole([r for r, _ in mine], [c for _, c in mine]), [threshold])[0]
    return f"{100 * p.shown:5.1f} {100 * p.precision:5.1f} {100 * p.exact:5.1f}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("old", type=Path)
    parser.add_argument("new", type=Path)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--precision", type=float, default=0.65)
    args = parser.parse_args()
    old, owner = _rows(args.old)
    new, owner_new = _rows(args.new)
    owner.update(owner_new)
    old_c = [r for r in old if r.features]
    new_c = [r for r in new if r.features]
    print("seed | which | threshold | dev shown precision exact | idioms-dev shown precision exact")
    for seed in range(args.seeds):
        sf.PARAMS["seed"] = seed
        results = {}
        for label, train, test in (("old on old", old_c, old_c), ("new on new", new_c, new_c),
                                   ("old filter on new", old_c, new_c)):
            raw_train = _predicted(train, train)  # the calibration and threshold are the training rows'
            calibration = Calibration(*map(tuple, sf.isotonic(raw_train, [r.exact for r in train])))
            train_rows = old if train is old_c else new
            it = iter(calibration(p) for p in raw_train)
            chances_train = [next(it) if r.features else -1.0 for r in train_rows]
            threshold = _chosen(train_rows, chances_train, args.precision)
            raw_test = raw_train if test is train else _predicted(train, test)
            test_rows = old if test is old_c else new
            it = iter(calibration(p) for p in raw_test)
            chances = [next(it) if r.features else -1.0 for r in test_rows]
            results[label] = (threshold, _at(test_rows, chances, owner, threshold, "dev"),
                              _at(test_rows, chances, owner, threshold, "idioms-dev"))
        for label, (threshold, dev, idioms) in results.items():
            print(f"{seed} | {label:17} | {threshold:.4f} | {dev} | {idioms}")


if __name__ == "__main__":
    main()
