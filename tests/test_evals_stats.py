"""CUDA-Infill statistics: bootstrap intervals and the per-kind summary table."""

from __future__ import annotations

import json

import pytest

from dice_lsp.evals.score import FillScore
from dice_lsp.evals.stats import Interval, bootstrap, summarise
from dice_lsp.evals.suite import SuiteHole


def test_known_sample_gives_its_mean_and_an_interval_around_it() -> None:
    interval = bootstrap([1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 1.0, 1.0])
    assert interval.mean == 0.75 and interval.n == 8
    assert 0.0 <= interval.low < 0.75 < interval.high <= 1.0


def test_a_constant_sample_has_a_zero_width_interval() -> None:
    assert bootstrap([0.5] * 10) == Interval(0.5, 0.5, 0.5, 10)


def test_intervals_narrow_as_the_sample_grows() -> None:
    small, large = bootstrap([0.0, 1.0] * 10), bootstrap([0.0, 1.0] * 1000)
    assert small.mean == large.mean == 0.5
    assert large.high - large.low < (small.high - small.low) / 5
    assert large.low < 0.5 < large.high


def test_same_seed_same_interval_other_seed_other_interval() -> None:
    values = [0.1, 0.9, 0.3, 0.7, 0.2, 0.4, 1.0, 0.0, 0.55]
    assert bootstrap(values, seed=3) == bootstrap(values, seed=3)
    assert bootstrap(values, seed=3) != bootstrap(values, seed=4)


def test_a_wider_level_gives_a_wider_interval() -> None:
    values = [float(i % 3 == 0) for i in range(60)]
    narrow, wide = bootstrap(values, level=0.5), bootstrap(values, level=0.99)
    assert wide.low < narrow.low < narrow.high < wide.high


def test_an_empty_sample_is_refused() -> None:
    with pytest.raises(ValueError):
        bootstrap([])


def _hole(kind: str, number: int, executable: bool = False) -> SuiteHole:
    return SuiteHole(f"{kind}/{number}", kind, "f/0", 0, 1, "k", False, executable)  # type: ignore[arg-type]


def _score(shown: bool, exact: bool = False, parses: bool = True, compiles: bool | None = None,
           passes: bool | None = None, similarity: float = 0.5) -> FillScore:
    return FillScore(shown, exact, exact, exact, similarity, parses and shown, shown, compiles, passes)


SCORES = [
    (_hole("line", 0), _score(True, exact=True, compiles=True, similarity=1.0), 10.0),
    (_hole("line", 1), _score(True, compiles=False), 20.0),
    (_hole("line", 2), _score(False, similarity=0.0), 30.0),
    (_hole("line", 3), _score(True, parses=False), 40.0),
    (_hole("body", 0, True), _score(True, compiles=True, passes=True), 100.0),
    (_hole("body", 1, True), _score(True, compiles=True, passes=False), 300.0),
]


def test_summary_rates_use_their_own_denominators() -> None:
    table = summarise(SCORES)
    assert list(table) == ["line", "body", "all"]
    line, body, every = table["line"], table["body"], table["all"]
    assert line["holes"] == 4 and body["holes"] == 2 and every["holes"] == 6
    assert (line["exact"]["mean"], line["exact"]["n"]) == (0.25, 4)
    assert line["similarity"]["mean"] == pytest.approx((1.0 + 0.5 + 0.0 + 0.5) / 4)
    assert (line["parses"]["mean"], line["show_rate"]["mean"]) == (0.5, 0.75)
    assert (line["compile_rate"]["mean"], line["compile_rate"]["n"]) == (0.5, 2)
    assert line["pass_rate"] is None
    assert (line["shown_precision"]["mean"], line["shown_precision"]["n"]) == (pytest.approx(1 / 3), 3)
    assert (body["pass_rate"]["mean"], body["pass_rate"]["n"]) == (0.5, 2)
    assert (body["shown_precision"]["mean"], body["shown_precision"]["n"]) == (0.5, 2)
    assert (every["compile_rate"]["mean"], every["compile_rate"]["n"]) == (0.75, 4)
    assert (every["shown_precision"]["mean"], every["shown_precision"]["n"]) == (0.4, 5)
    assert (every["shown_valid"]["mean"], every["shown_valid"]["n"]) == (0.4, 5)
    assert (line["latency_p50_ms"], line["latency_p95_ms"]) == (25.0, pytest.approx(38.5))
    assert body["latency_p50_ms"] == 200.0
    for row in table.values():
        for value in row.values():
            if isinstance(value, dict):
                assert value["low"] <= value["mean"] <= value["high"]


def test_summary_is_plain_json_and_empty_for_no_scores() -> None:
    text = json.dumps(summarise(SCORES))
    assert json.loads(text)["all"]["exact"]["n"] == 6
    assert summarise([]) == {}


def test_a_fill_that_holds_up_is_not_yet_right() -> None:
    """Parsing and compiling make a shown fill valid; only the true code, or passing where run, makes it right."""
    valid_only = (_hole("line", 9), _score(True, compiles=True), 5.0)
    ran = (_hole("body", 9, True), _score(True, compiles=True, passes=True), 5.0)
    row = summarise([valid_only, ran])["all"]
    assert (row["shown_valid"]["mean"], row["shown_precision"]["mean"]) == (1.0, 0.5)
