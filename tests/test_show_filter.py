"""The show/withhold decision (`dice_lsp.completion.decide`) and its training (`dice_lsp.training.show_filter`):
calibration, the threshold chosen for a target precision, and what the pipeline shows with a filter."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path

import pytest

from dice_lsp.complete import Decision, PreparedFill, prepare
from dice_lsp.completion.decide import Calibration, ShowFilter, show_filter
from dice_lsp.completion.features import FEATURES, Evidence, Hole, row
from dice_lsp.engine import EMBEDDED_MODEL, FillResult
from dice_lsp.engine.tokenizer import Tokenizer
from dice_lsp.errors import DiceError
from dice_lsp.settings import Settings
from dice_lsp.textdoc import Position
from dice_lsp.training import show_filter as training


def test_isotonic_pools_adjacent_violators() -> None:
    assert training.isotonic([0.1, 0.2, 0.3, 0.4], [False, True, False, True]) == ([0.1, 0.25, 0.4], [0.0, 0.5, 1.0])


def test_calibration_interpolates_and_clamps() -> None:
    calibrate = Calibration((0.1, 0.3), (0.0, 0.5))
    assert (calibrate(0.0), calibrate(0.2), calibrate(0.9)) == pytest.approx((0.0, 0.25, 0.5))


def _rows(count: int) -> list[training.Row]:
    """Holes of two candidates: the one with the high document score is exact in 9 holes of 10."""
    rows = []
    hole = Hole("void f() {\n    int a = 1;\n    ", "\n}\n")
    for i in range(count):
        good = Evidence("a += 1;", {"document": 0.95}, True, True)
        bad = Evidence("a -= 2;", {"model": -0.9}, True, True)
        for evidence, exact in ((good, i % 10 != 0), (bad, False)):
            rows.append(training.Row(f"h{i}", f"file{i % 25}", "line", 7, evidence.text, "x",
                                     row(evidence, hole, [-0.9], 2), exact))
    return rows


def test_training_picks_the_threshold_for_the_target_precision_and_loads_back() -> None:
    data = training.train(_rows(200), 0.6)
    assert data["features"] == list(FEATURES) and data["target_precision"] == 0.6
    shown = [p for p in data["out_of_fold"] if p["threshold"] >= data["threshold"]]
    assert shown[0]["precision"] >= 0.6 and shown[0]["shown"] == 1.0, "the document's line, shown at every hole"
    loaded = ShowFilter.from_json(json.loads(json.dumps(data)))
    hole = Hole("void f() {\n    int a = 1;\n    ", "\n}\n")
    good, bad = loaded.probabilities([row(Evidence("a += 1;", {"document": 0.95}, True, True), hole, [-0.9], 2),
                                      row(Evidence("a -= 2;", {"model": -0.9}, True, True), hole, [-0.9], 2)])
    assert good == pytest.approx(0.9, abs=0.05) and bad < 0.05


def test_a_filter_of_other_features_is_refused(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    data = training.train(_rows(100), 0.6)
    with pytest.raises(DiceError, match="other features"):
        ShowFilter.from_json({**data, "features": [*FEATURES, "something new"]})
    (tmp_path / "show_filter.json").write_text(json.dumps({**data, "format": 99}))
    with caplog.at_level(logging.WARNING, "dice_lsp.decide"):
        assert show_filter(tmp_path) is None
    assert "not used (show filter format 99 is not 1)" in caplog.text
    assert show_filter(tmp_path / "none") is None


def test_the_test_split_is_never_trained_on(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert training.main(["collect", "--split", "test", "--out", str(tmp_path / "rows.jsonl.gz")]) == 2
    assert capsys.readouterr().err.strip() == (
        "show_filter: the test split measures the product: the show filter is never trained on it")


@dataclass
class Chances:
    """A filter that gives each candidate text a set probability, told apart by length, and 0 to any other (the
    document's lines): the pipeline's plumbing, not a model."""

    by_text: dict[str, float]
    threshold: float = 0.5
    region_chance: float | None = None

    def probabilities(self, rows: list[list[float]]) -> list[float]:
        chars = FEATURES.index("chars")
        return [next((p for text, p in self.by_text.items() if len(text) == r[chars]), 0.0) for r in rows]


TEXT = ("__global__ void add(const float* a, float* c, int n) {\n"
        "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "    \n"
        "}\n")


@pytest.fixture(scope="module")
def prepared() -> PreparedFill:
    found = prepare(Tokenizer(EMBEDDED_MODEL), 512, TEXT, Position(2, 4), Settings())
    assert found is not None
    return found


def fills(*texts: str) -> FillResult:
    return FillResult(list(texts), 1, [-0.5] * len(texts), [24] * len(texts))


def test_candidates_are_ranked_by_their_chance_and_the_unlikely_withheld(prepared: PreparedFill) -> None:
    chances = Chances({"if (i < n) c[i] = a[i];": 0.7, "c[i] = 0;": 0.2, "if (i >= n) return;": 0.55})
    decision = Decision(chances, 0.5)  # type: ignore[arg-type]
    completion = prepared.completion(fills("c[i] = 0;", "if (i >= n) return;", "if (i < n) c[i] = a[i];"),
                                     decision=decision)
    assert completion.texts == ["if (i < n) c[i] = a[i];", "if (i >= n) return;"]
    assert completion.confidences == [0.7, 0.55]


def test_nothing_is_shown_when_the_best_is_unlikely_and_the_editor_is_told_why(prepared: PreparedFill) -> None:
    decision = Decision(Chances({"c[i] = 0;": 0.2}), 0.5)  # type: ignore[arg-type]
    completion = prepared.completion(fills("c[i] = 0;"), decision=decision)
    assert completion.texts == []
    assert completion.withheld == ("the best candidate is likely not what you would write "
                                   "(P(right) 0.20 < 0.50, dice.minConfidence)")


def test_min_confidence_is_a_probability_or_null() -> None:
    assert Settings().updated({"minConfidence": 0.4})[0].min_confidence == 0.4
    assert Settings().updated({"minConfidence": None}) == (Settings(), [])
    assert Settings().updated({"minConfidence": 1.5})[1] == ["dice.minConfidence: must be in [0, 1] (-1: not set)"]


MARKED = ("__global__ void add(const float* a, float* c, int n) {\n"
          "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
          "    /*@fill*/\n"
          "}\n")


def test_a_region_larger_than_a_line_gets_the_share_measured_on_dev() -> None:
    region = prepare(Tokenizer(EMBEDDED_MODEL), 512, MARKED, Position(2, 6), Settings())
    assert region is not None and region.context.hole.kind == "marker"
    fill = "if (i < n) {\n        c[i] = a[i];\n    }"
    unmeasured = region.completion(fills(fill), decision=Decision(Chances({}), 0.5))  # type: ignore[arg-type]
    assert unmeasured.texts and unmeasured.confidences == [None]
    silent = region.completion(fills(fill), decision=Decision(Chances({}, region_chance=0.02), 0.5))  # type: ignore[arg-type]
    assert silent.texts == []
    assert silent.withheld == ("the best candidate is likely not what you would write "
                               "(P(right) 0.02 < 0.50, dice.minConfidence)")
    asked = region.completion(fills(fill), decision=Decision(Chances({}, region_chance=0.02), 0.0))  # type: ignore[arg-type]
    assert asked.texts and asked.confidences == [0.02]


def _report(path: Path, split: str, fills: list[tuple[str, bool, bool]]) -> Path:
    path.write_text(json.dumps({"split": split, "fills": [{"kind": kind, "shown": shown, "exact_ws": exact}
                                                          for kind, shown, exact in fills]}))
    return path


def test_regions_stores_the_smoothed_share_of_right_multiline_fills(tmp_path: Path) -> None:
    dev = _report(tmp_path / "dev.json", "dev", [("lines", True, False), ("lines", True, True), ("body", False, False),
                                                 ("body", True, False), ("line", True, True)])
    assert training.regions([dev]) == {"holes": 4, "shown": 3, "exact": 1, "p_exact": 0.4}
    filter_path = tmp_path / "show_filter.json"
    filter_path.write_text(json.dumps(training.train(_rows(100), 0.6)))
    assert training.main(["regions", "--reports", str(dev), "--filter", str(filter_path)]) == 0
    assert ShowFilter.from_json(json.loads(filter_path.read_text())).region_chance == 0.4
    test = _report(tmp_path / "test.json", "test", [("body", True, True)])
    with pytest.raises(DiceError, match="test-split report"):
        training.regions([test])
