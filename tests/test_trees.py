"""The show filter's trees evaluated in plain Python give LightGBM's own probabilities (`dice_lsp.completion.trees`)."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest

from dice_lsp.completion.trees import Forest
from dice_lsp.engine import EMBEDDED_MODEL
from dice_lsp.errors import DiceError

lightgbm = pytest.importorskip("lightgbm")
np = pytest.importorskip("numpy")

SHIPPED = json.loads((Path(EMBEDDED_MODEL) / "show_filter.json").read_text())["booster"]


def rows_near_the_splits(text: str, count: int, seed: int = 0) -> list[list[float]]:
    """Feature rows whose values sit on, just below and just above the model's thresholds, with zeros and NaNs:
    every branch of every split is taken somewhere."""
    booster = lightgbm.Booster(model_str=text)
    dump = booster.dump_model()
    cuts: dict[int, list[float]] = {}

    def walk(node: dict[str, object]) -> None:
        if "split_feature" in node:
            cuts.setdefault(int(node["split_feature"]), []).append(float(node["threshold"]))  # type: ignore[arg-type]
            walk(node["left_child"])  # type: ignore[arg-type]
            walk(node["right_child"])  # type: ignore[arg-type]

    for tree in dump["tree_info"]:
        walk(tree["tree_structure"])
    width = booster.num_feature()
    rng = random.Random(seed)
    rows = []
    for _ in range(count):
        row = []
        for feature in range(width):
            pick = rng.random()
            at = rng.choice(cuts.get(feature, [0.0]))
            at = 0.0 if math.isinf(at) else at
            row.append(math.nan if pick < 0.05 else 0.0 if pick < 0.15 else
                       rng.choice([at, math.nextafter(at, -math.inf), math.nextafter(at, math.inf),
                                   at + rng.uniform(-2, 2)]))
        rows.append(row)
    return rows


def test_the_shipped_filter_gives_lightgbm_s_probabilities() -> None:
    forest = Forest.parse(SHIPPED)
    rows = rows_near_the_splits(SHIPPED, 2000)
    expected = lightgbm.Booster(model_str=SHIPPED).predict(np.asarray(rows, dtype=np.float64))
    assert len(forest.trees) > 1
    for row, want in zip(rows, expected, strict=True):
        assert forest.probability(row) == pytest.approx(float(want), abs=1e-12)


def test_a_model_trained_here_with_zero_as_missing_and_a_single_leaf_tree_gives_lightgbm_s_probabilities() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(400, 5))
    x[rng.random(x.shape) < 0.2] = 0.0
    x[rng.random(x.shape) < 0.1] = np.nan
    y = (np.nan_to_num(x[:, 0]) + 0.5 * np.nan_to_num(x[:, 2]) > 0).astype(int)
    booster = lightgbm.train({"objective": "binary", "verbose": -1, "num_leaves": 7, "zero_as_missing": True,
                              "min_data_in_leaf": 5}, lightgbm.Dataset(x, y), num_boost_round=12)
    text = booster.model_to_string()
    forest = Forest.parse(text)
    probe = np.vstack([x[:100], rng.normal(size=(100, 5))])
    for row, want in zip(probe.tolist(), booster.predict(probe), strict=True):
        assert forest.probability(row) == pytest.approx(float(want), abs=1e-12)
    constant = lightgbm.train({"objective": "binary", "verbose": -1}, lightgbm.Dataset(x, np.ones(400, dtype=int)),
                              num_boost_round=2)
    assert Forest.parse(constant.model_to_string()).probability([0.0] * 5) == pytest.approx(
        float(constant.predict(np.zeros((1, 5)))[0]), abs=1e-12)


def test_what_it_cannot_evaluate_is_refused_when_read() -> None:
    with pytest.raises(DiceError, match="binary"):
        Forest.parse(SHIPPED.replace("objective=binary sigmoid:1", "objective=regression"))
    with pytest.raises(DiceError, match="categorical"):
        Forest.parse(SHIPPED.replace("num_cat=0", "num_cat=1", 1))
    with pytest.raises(DiceError, match="features"):
        Forest.parse(SHIPPED).probability([0.0])
