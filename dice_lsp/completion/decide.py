"""Whether to show a candidate: a small calibrated classifier's P(the candidate is exactly what the user writes).

The filter is a LightGBM booster over `dice_lsp.completion.features` (a few dozen shallow trees, evaluated by
`dice_lsp.completion.trees` without importing LightGBM), trained without users: on candidates the product made
for the holes of the CUDA-Infill dev split, each labelled exact or not (`python -m dice_lsp.training.show_filter`).
Its probabilities are calibrated out-of-fold (isotonic, files kept together) so that a threshold reads as a
precision: among completions shown at `P >= t`, about that share or more are right. The threshold the product uses
is chosen on dev for a target precision and stored with the booster; `dice.minConfidence` moves it (0: show
whatever passes the checks; 1: almost nothing).

A region larger than a line (an unfinished body, a marker, a selection) has no features of its own: its best fill
gets the share of such fills that were exactly right on the dev split (`regions`, Laplace-smoothed, measured with
`python -m dice_lsp.training.show_filter regions`), so a model whose multi-line fills are rarely right stays silent
there unless `dice.minConfidence` is lowered to it.

The filter ships with the model it was trained on (`show_filter.json` in the model folder), in LightGBM's text
format inside JSON: loading it runs no code from the file. A checkpoint folder without one is ranked and shown as
before the filter (the checks decide; a document line needs strong evidence), since the booster's features
include that model's own scores.
"""

from __future__ import annotations

import bisect
import json
import logging
import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from dice_lsp.completion.features import FEATURES
from dice_lsp.completion.trees import Forest
from dice_lsp.errors import DiceError

LOG = logging.getLogger("dice_lsp.decide")
FILE_NAME = "show_filter.json"
FORMAT = 1


@dataclass(frozen=True)
class Calibration:
    """A monotone map from the booster's raw probability to a calibrated one (piecewise linear through points)."""

    raw: tuple[float, ...]
    calibrated: tuple[float, ...]

    def __call__(self, value: float) -> float:
        if not self.raw:
            return value
        at = bisect.bisect_left(self.raw, value)
        if at == 0:
            return self.calibrated[0]
        if at >= len(self.raw):
            return self.calibrated[-1]
        lo, hi = self.raw[at - 1], self.raw[at]
        share = (value - lo) / (hi - lo) if hi > lo else 1.0
        return self.calibrated[at - 1] + share * (self.calibrated[at] - self.calibrated[at - 1])


class ShowFilter:
    """P(exact) of candidates, and the threshold chosen for the stored target precision."""

    def __init__(self, forest: Forest, calibration: Calibration, threshold: float, meta: dict[str, Any]) -> None:
        self.forest, self.calibration, self.threshold, self.meta = forest, calibration, threshold, meta

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ShowFilter:
        if data.get("format") != FORMAT:
            raise DiceError(f"show filter format {data.get('format')!r} is not {FORMAT}")
        if tuple(data["features"]) != FEATURES:
            raise DiceError("show filter was trained on other features than this version computes")
        forest = Forest.parse(data["booster"])
        points = data.get("calibration", {"raw": [], "calibrated": []})
        calibration = Calibration(tuple(points["raw"]), tuple(points["calibrated"]))
        meta = {key: value for key, value in data.items() if key not in ("booster", "calibration")}
        return cls(forest, calibration, float(data["threshold"]), meta)

    @property
    def region_chance(self) -> float | None:
        """P(exact) of the best checked fill of a region larger than a line (None: not measured for this model)."""
        regions = self.meta.get("regions")
        return float(regions["p_exact"]) if isinstance(regions, dict) and "p_exact" in regions else None

    def probabilities(self, rows: list[list[float]]) -> list[float]:
        """Calibrated P(exact) of each feature row (`dice_lsp.completion.features.row`)."""
        return [round(self.calibration(self.forest.probability(row)), 4) for row in rows]


@lru_cache(maxsize=8)
def show_filter(folder: Path) -> ShowFilter | None:
    """The show filter that ships with the model in `folder`; None when it has none (or one this version cannot
    read: logged once)."""
    path = folder / FILE_NAME
    if not path.is_file():
        return None
    try:
        return ShowFilter.from_json(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, DiceError) as exc:
        LOG.warning("%s: not used (%s)", path, exc)
        return None


def threshold(filter_: ShowFilter, min_confidence: float | None) -> float:
    """The probability a candidate needs to be shown: the setting's when given, else the filter's own."""
    if min_confidence is None or math.isnan(min_confidence):
        return filter_.threshold
    return min_confidence
