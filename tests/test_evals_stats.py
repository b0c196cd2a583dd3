"""CUDA-Infill statistics: bootstrap intervals and the per-kind summary table."""

from __future__ import annotations

import json

import pytest

from dice_lsp.evals.score import FillScore
from dice_lsp.evals.stats import RATE_NAMES, Interval, KindSummary, bootstrap, summarise
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


def _of(value: Interval | None) -> Interval:
    assert value is not None, "a rate with a denominator is measured"
    return value


def test_summary_rates_use_their_own_denominators() -> None:
    table = summarise(SCORES)
    assert list(table) == ["line", "body", "all"]
    line, body, every = table["line"], table["body"], table["all"]
    assert line.holes == 4 and body.holes == 2 and every.holes == 6
    assert (_of(line.exact).mean, _of(line.exact).n) == (0.25, 4)
    assert _of(line.similarity).mean == pytest.approx((1.0 + 0.5 + 0.0 + 0.5) / 4)
    assert (_of(line.parses).mean, _of(line.show_rate).mean) == (0.5, 0.75)
    assert (_of(line.compile_rate).mean, _of(line.compile_rate).n) == (0.5, 2)
    assert line.pass_rate is None
    assert _of(line.shown_precision).mean == pytest.approx(1 / 3) and _of(line.shown_precision).n == 3
    assert (_of(body.pass_rate).mean, _of(body.pass_rate).n) == (0.5, 2)
    assert (_of(body.shown_precision).mean, _of(body.shown_precision).n) == (0.5, 2)
    assert (_of(every.compile_rate).mean, _of(every.compile_rate).n) == (0.75, 4)
    assert (_of(every.shown_precision).mean, _of(every.shown_precision).n) == (0.4, 5)
    assert (_of(every.shown_valid).mean, _of(every.shown_valid).n) == (0.4, 5)
    assert line.latency_p50_ms == 25.0 and line.latency_p95_ms == pytest.approx(38.5)
    assert body.latency_p50_ms == 200.0
    for row in table.values():
        for name in RATE_NAMES:
            if (value := row.rate(name)) is not None:
                assert value.low <= value.mean <= value.high


def test_summary_json_has_every_rate_in_order_and_reads_back() -> None:
    table = summarise(SCORES)
    data = json.loads(json.dumps({kind: row.to_json() for kind, row in table.items()}))
    assert list(data["all"]) == ["holes", *RATE_NAMES, "latency_p50_ms", "latency_p95_ms"]
    exact = _of(table["all"].exact)
    assert data["all"]["exact"] == {"mean": exact.mean, "low": exact.low, "high": exact.high, "n": 6}
    assert data["line"]["pass_rate"] is None
    assert {kind: KindSummary.from_json(row) for kind, row in data.items()} == table
    assert summarise([]) == {}


def test_a_rate_an_older_report_lacks_reads_as_none_and_stays_out() -> None:
    old = summarise(SCORES)["all"].to_json()
    del old["shown_valid"]
    row = KindSummary.from_json(old)
    assert row.shown_valid is None and row.unrecorded == ("shown_valid",)
    assert row.to_json() == old and list(row.to_json()) == list(old)
    with pytest.raises(KeyError):
        row.rate("holes")


def test_a_fill_that_holds_up_is_not_yet_right() -> None:
    """Parsing and compiling make a shown fill valid; only the true code, or passing where run, makes it right."""
    valid_only = (_hole("line", 9), _score(True, compiles=True), 5.0)
    ran = (_hole("body", 9, True), _score(True, compiles=True, passes=True), 5.0)
    row = summarise([valid_only, ran])["all"]
    assert (_of(row.shown_valid).mean, _of(row.shown_precision).mean) == (1.0, 0.5)
