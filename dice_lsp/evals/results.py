"""The report of one system over (part of) the CUDA-Infill suite, typed; JSON only at the wire.

`evaluate` makes an `EvalReport`; the CLI and the bench scripts write it with `to_json()` (`--json`, `--out`,
the logs under docs/bench-logs) and read saved ones with `from_json()`. The JSON is the report's long-standing
shape, key for key and in the same order:

- `suite`, `split`, `system`, `label`, `executed`, `settings` (the run's settings as given, free-form),
  `holes` (how many were asked);
- `kinds`: one `KindSummary` per hole kind present, then `all` (see `stats`);
- `fills`: one `FillRow` per hole in suite order: the hole's id and kind, the fill shown (null: nothing
  shown), its latency in ms (one decimal), the model calls it took, then every `FillScore` field;
- `hole_rows` (bench/dev_pool.py: where each hole of a generated pool lies) and `wall_s` (bench/cuda_infill.py:
  the run's wall time) only when a bench script set them.

Older saved reports are read as they are and written back unchanged: a fill row without `model_calls` keeps
none (and writes none), a summary row without a later rate reads it as None (see `stats.KindSummary`), a
hole row keeps the `function` that early pools recorded.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

from dice_lsp.evals.score import FillScore
from dice_lsp.evals.stats import KindSummary
from dice_lsp.evals.suite import KINDS, Kind, SuiteHole

_SCORE_FIELDS = tuple(f.name for f in fields(FillScore))


def _kind(value: object) -> Kind:
    """`value` as a hole kind; ValueError when it names none."""
    for kind in KINDS:
        if value == kind:
            return kind
    raise ValueError(f"unknown hole kind {value!r}")


@dataclass(frozen=True)
class FillRow:
    """One hole's fill, its latency and its verdicts."""

    hole: str  # SuiteHole.id
    kind: Kind
    fill: str | None  # what the editor would show; None when it shows nothing
    latency_ms: float
    model_calls: int | None  # None only in reports older than the count
    score: FillScore
    confidence: float | None = None  # the show filter's P(right) of the fill (written only when a filter decided)

    def to_json(self) -> dict[str, Any]:
        calls = {} if self.model_calls is None else {"model_calls": self.model_calls}
        chance = {} if self.confidence is None else {"confidence": self.confidence}
        return {"hole": self.hole, "kind": self.kind, "fill": self.fill, "latency_ms": self.latency_ms, **calls,
                **asdict(self.score), **chance}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FillRow:
        score = FillScore(**{name: data[name] for name in _SCORE_FIELDS})
        return cls(data["hole"], _kind(data["kind"]), data["fill"], data["latency_ms"], data.get("model_calls"), score,
                   data.get("confidence"))

    def suite_hole(self) -> SuiteHole:
        """A stand-in hole with this row's id and kind, executable where the fill was run (for `summarise`)."""
        return SuiteHole(self.hole, self.kind, "", 0, 0, "", False, self.score.passes is not None)


@dataclass(frozen=True)
class HoleRow:
    """Where a hole lies in its file (bench/dev_pool.py keeps these for the holes it generates)."""

    id: str
    kind: Kind
    file: str
    start: int
    end: int
    function: str | None = None  # the enclosing function: kept by early pools, None since

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"id": self.id, "kind": self.kind, "file": self.file, "start": self.start,
                                "end": self.end}
        if self.function is not None:
            data["function"] = self.function
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> HoleRow:
        return cls(data["id"], _kind(data["kind"]), data["file"], data["start"], data["end"], data.get("function"))


@dataclass(frozen=True)
class EvalReport:
    """One system's run over a suite's holes: per-kind summary and every fill (see the module's docstring)."""

    suite: str
    split: str
    system: str
    label: str
    executed: bool
    settings: dict[str, Any]  # the run's settings as the caller gave them: the settings boundary, free-form
    holes: int
    kinds: dict[str, KindSummary]
    fills: list[FillRow]
    hole_rows: list[HoleRow] | None = None
    wall_s: float | None = None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "suite": self.suite, "split": self.split, "system": self.system, "label": self.label,
            "executed": self.executed, "settings": self.settings, "holes": self.holes,
            "kinds": {kind: row.to_json() for kind, row in self.kinds.items()},
            "fills": [row.to_json() for row in self.fills],
        }
        if self.hole_rows is not None:
            data["hole_rows"] = [row.to_json() for row in self.hole_rows]
        if self.wall_s is not None:
            data["wall_s"] = self.wall_s
        return data

    def summary_json(self) -> dict[str, Any]:
        """What `dice-lsp eval table --json` prints of a report: who, which split, how many holes, the table."""
        return {"system": self.system, "label": self.label, "split": self.split, "holes": self.holes,
                "kinds": {kind: row.to_json() for kind, row in self.kinds.items()}}

    @classmethod
    def from_json(cls, data: object) -> EvalReport:
        """The report `data` holds; ValueError naming what is missing or wrong when it holds none."""
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        try:
            hole_rows = data.get("hole_rows")
            return cls(
                suite=data["suite"], split=data["split"], system=data["system"], label=data["label"],
                executed=data["executed"], settings=data["settings"], holes=data["holes"],
                kinds={kind: KindSummary.from_json(row) for kind, row in data["kinds"].items()},
                fills=[FillRow.from_json(row) for row in data["fills"]],
                hole_rows=None if hole_rows is None else [HoleRow.from_json(row) for row in hole_rows],
                wall_s=data.get("wall_s"))
        except KeyError as exc:
            raise ValueError(f"no {exc.args[0]!r}") from exc
        except (TypeError, AttributeError) as exc:
            raise ValueError(f"malformed ({exc})") from exc
