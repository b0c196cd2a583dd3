"""CUDA-Infill's summary table: every rate with a percentile-bootstrap confidence interval.

`bootstrap` resamples the values with replacement (`resamples` times, numpy's PCG64 seeded with `seed`,
so the same values and seed give the same interval) and takes the `level` central percentiles of the
resampled means; the interval's `mean` is the sample's own mean and `n` its size.

`summarise` makes one row per hole kind present (in `KINDS` order) and an `all` row. Per row, over its
holes, each rate is an interval whose `n` is its denominator:

- `exact`, `exact_ws`, `first_line`, `similarity`, `parses`, `show_rate`: over every hole (a fill that
  was not shown counts as 0 on each);
- `compile_rate`: over the holes that were compile-checked (`compiles` not None);
- `pass_rate`: over the executable holes (`passes` not None);
- `shown_precision`: over the holes whose fill was shown, the share that is *right*: the true code (the
  same C tokens) or, where it was executed, a fill that passes. It judges what a user is shown by a
  criterion that no filter of the completion pipeline can check, so suppression cannot game it;
- `shown_valid`: over the same holes, the share that *holds up*: it parses, compiles where it was
  compile-checked, and passes where it was executed (a constant line scores well here: validity is not
  usefulness).

A rate with no denominator (no executable hole in a kind, say) is None. Latency is the p50 and p95 of the
system's milliseconds per hole (numpy's linear interpolation). A row is a `KindSummary` of `Interval`s;
`to_json` gives the report's JSON (rates in the order above, then the latencies) and `from_json` reads it
back. A rate that a saved report does not have (reports older than `shown_valid`) reads as None, as one
with no denominator does, and is named in `unrecorded` so that writing the row again leaves it out: a saved
report read and written is the same JSON.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from dice_lsp.evals.score import FillScore
from dice_lsp.evals.suite import KINDS, SuiteHole

Row = tuple[SuiteHole, FillScore, float]
_DRAWS_PER_BLOCK = 1 << 21  # indices drawn at once, so a large sample does not need gigabytes


@dataclass(frozen=True)
class Interval:
    mean: float
    low: float
    high: float
    n: int

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Interval:
        return cls(data["mean"], data["low"], data["high"], data["n"])


@dataclass(frozen=True)
class KindSummary:
    """One row of the summary table: the holes of one kind (or `all`), each rate's interval, latency."""

    holes: int
    exact: Interval | None
    exact_ws: Interval | None
    first_line: Interval | None
    similarity: Interval | None
    parses: Interval | None
    compile_rate: Interval | None
    pass_rate: Interval | None
    show_rate: Interval | None
    shown_precision: Interval | None
    shown_valid: Interval | None
    latency_p50_ms: float
    latency_p95_ms: float
    unrecorded: tuple[str, ...] = ()  # rates an older saved report does not have (read as None, not written)

    def rate(self, name: str) -> Interval | None:
        """The rate called `name` (a field holding an interval), for tables that loop over metrics."""
        if name not in RATE_NAMES:
            raise KeyError(name)
        value: Interval | None = getattr(self, name)
        return value

    def to_json(self) -> dict[str, Any]:
        rates = {name: None if (value := self.rate(name)) is None else value.to_json()
                 for name in RATE_NAMES if name not in self.unrecorded}
        return {"holes": self.holes, **rates, "latency_p50_ms": self.latency_p50_ms,
                "latency_p95_ms": self.latency_p95_ms}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> KindSummary:
        rates = {name: None if data.get(name) is None else Interval.from_json(data[name]) for name in RATE_NAMES}
        return cls(holes=data["holes"], latency_p50_ms=data["latency_p50_ms"],
                   latency_p95_ms=data["latency_p95_ms"], unrecorded=tuple(n for n in RATE_NAMES if n not in data),
                   **rates)


RATE_NAMES = ("exact", "exact_ws", "first_line", "similarity", "parses", "compile_rate", "pass_rate", "show_rate",
              "shown_precision", "shown_valid")  # KindSummary's intervals, in the JSON's order

def bootstrap(values: Sequence[float], resamples: int = 2000, seed: int = 0, level: float = 0.95) -> Interval:
    """The mean of `values` and its percentile-bootstrap interval at `level` (deterministic in `seed`)."""
    sample = np.asarray(values, dtype=np.float64)
    if sample.size == 0:
        raise ValueError("bootstrap needs at least one value")
    rng = np.random.default_rng(seed)
    rows = max(1, _DRAWS_PER_BLOCK // sample.size)
    means = np.concatenate([
        sample[rng.integers(0, sample.size, size=(min(rows, resamples - done), sample.size))].mean(axis=1)
        for done in range(0, resamples, rows)])
    tail = (1.0 - level) / 2
    low, high = np.quantile(means, [tail, 1.0 - tail])
    return Interval(float(sample.mean()), float(low), float(high), int(sample.size))


def _rate(rows: list[Row], value: Callable[[FillScore], float | None]) -> Interval | None:
    """The interval of `value` over the rows where it is not None; None when there is no such row."""
    values = [v for _, s, _ in rows if (v := value(s)) is not None]
    return bootstrap(values) if values else None


def _valid(score: FillScore) -> float | None:
    """For a shown fill: 1.0 when it parses, compiles where checked and passes where run; else None."""
    if not score.shown:
        return None
    return float(score.parses and score.compiles is not False and score.passes is not False)


def _right(score: FillScore) -> float | None:
    """For a shown fill: 1.0 when it is the true code (in C tokens) or passes where it was run; else None."""
    if not score.shown:
        return None
    return float(score.exact_ws or bool(score.passes))


def _row(rows: list[Row]) -> KindSummary:
    latency = np.asarray([ms for _, _, ms in rows], dtype=np.float64)
    return KindSummary(
        holes=len(rows),
        exact=_rate(rows, lambda s: float(s.exact)),
        exact_ws=_rate(rows, lambda s: float(s.exact_ws)),
        first_line=_rate(rows, lambda s: float(s.first_line)),
        similarity=_rate(rows, lambda s: s.similarity),
        parses=_rate(rows, lambda s: float(s.parses)),
        compile_rate=_rate(rows, lambda s: None if s.compiles is None else float(s.compiles)),
        pass_rate=_rate(rows, lambda s: None if s.passes is None else float(s.passes)),
        show_rate=_rate(rows, lambda s: float(s.shown)),
        shown_precision=_rate(rows, _right),
        shown_valid=_rate(rows, _valid),
        latency_p50_ms=float(np.percentile(latency, 50)),
        latency_p95_ms=float(np.percentile(latency, 95)),
    )


def summarise(scores: list[Row]) -> dict[str, KindSummary]:
    """One row per hole kind present, then `all` (none for no scores); see the module's docstring."""
    table: dict[str, KindSummary] = {}
    for kind in KINDS:
        if rows := [r for r in scores if r[0].kind == kind]:
            table[kind] = _row(rows)
    if scores:
        table["all"] = _row(scores)
    return table
