"""Canonical CUDA idioms: the lines every CUDA programmer writes, as holes for the product's completion.

    python bench/canonical_idioms.py --out docs/bench-logs/idioms/<date>_baseline \
        --stages "+clang front end" "+document lines" "+sources and show filter (product)"
    python bench/canonical_idioms.py --holes            # the set's holes and truths, no model

`bench/idioms/` holds small textbook kernels (vector add, reductions, warp shuffles, tiled matmul, transposes,
stencils, scans, softmax, ...), one `.cu` file each, written for this benchmark. A trailing comment marks a hole
on its line (bench/idioms/README.md):

    int i = blockIdx.x * blockDim.x + threadIdx.x;  // @hole
    sdata[tid] += sdata[tid + s];  // @hole midline=sdata[tid] +=

`// @hole` is a `line` hole: the whole statement (first to last non-blank character) is the truth, and the user
has the line emptied down to its indentation. `// @hole midline=<prefix>` is a `midline` hole: the line's content
starts with `<prefix>`, which stays typed together with the blanks after it; the rest of the line is the truth.
`load_idioms` makes a `dice_lsp.evals.suite.Suite` of the folder in memory: each file's text is the file with
every marker comment (and the blanks before it) removed, and each hole's start and end are offsets of its truth
in that text, so `systems.document_for` gives the document the editor has: that hole's text removed and nothing
else. A malformed marker, a file without one or a folder without kernels is a one-line error (exit 2).

Every asked stage of `bench/completion_pipeline.py`'s `STAGES` runs the holes through `systems.ModelSystem` on
this machine, one request after another, and `dice_lsp.evals.run.evaluate` scores them as the suite does. The
measure that matters here is *precision of shown*: among the fills the editor would show, the share that is
the truth up to whitespace between C tokens (`FillScore.exact_ws`, the suite's `shown_precision`), beside how
often anything is shown and how often the truth is shown (exact, of all holes). On lines this conventional a
wrong fill is a visible mistake, and not showing is cheap. A first row, no model, is the reference to beat:
the constant thread-index line (`systems.idiom()`) shown at every hole (`--no-baseline` leaves it out).

Written to `--out DIR`: `table.md` (one row per stage and kind), `<stage>.json` (the full `EvalReport`, with
where each hole lies), `<stage>.fills.md` (every shown fill beside its truth, and the holes left unshown),
`idiom_baseline.json` and `summary.json` (what `--json` prints). Latency is this machine's, one request at a
time, with whatever else runs on it.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dice_lsp.errors import DiceError
from dice_lsp.evals.marked import (
    load_marked,
    typed_prefix,
)
from dice_lsp.evals.suite import Kind, Suite, SuiteHole

if TYPE_CHECKING:
    from dice_lsp.evals.results import EvalReport

IDIOMS_ROOT = Path(__file__).resolve().parent / "idioms"
SUITE_NAME = "canonical-idioms"
SPLIT = "idioms"
KIND_ORDER: tuple[Kind, ...] = ("line", "midline")
MODEL_STAGE = "+clang front end"  # the model's fills alone, checked as the product checks them
BASELINE = "constant idiom line (no model)"  # systems.idiom(): the thread-index line shown at every hole
def load_idioms(folder: Path = IDIOMS_ROOT, compile_check: bool = True) -> Suite:
    """The canonical-idioms set (or another folder in its format) as a suite (`dice_lsp.evals.marked`)."""
    return load_marked(folder, compile_check, SUITE_NAME, SPLIT)


# ---------------------------------------------------------------- measuring


@dataclass(frozen=True)
class StageRow:
    """One stage's counts over the holes of one kind (or `all`)."""

    stage: str
    kind: str
    holes: int
    shown: int
    exact: int  # shown and the truth up to whitespace between tokens (exact among shown, of all holes)
    p50_ms: float
    p95_ms: float

    @property
    def wrong(self) -> int:
        return self.shown - self.exact

    @property
    def precision(self) -> float | None:
        """Exact among shown; None when nothing was shown."""
        return self.exact / self.shown if self.shown else None

    def to_json(self) -> dict[str, Any]:
        precision = self.precision
        return {"holes": self.holes, "shown": self.shown, "exact": self.exact, "wrong_shown": self.wrong,
                "shown_pct": round(100 * self.shown / self.holes, 1),
                "exact_pct": round(100 * self.exact / self.holes, 1),
                "precision_of_shown_pct": None if precision is None else round(100 * precision, 1),
                "p50_ms": round(self.p50_ms), "p95_ms": round(self.p95_ms)}


def stage_rows(stage: str, report: EvalReport) -> list[StageRow]:
    """A row per hole kind present and one for all kinds together, from the report's scores (exactness is
    `exact_ws`) and its latency percentiles."""
    rows = []
    for kind in (*KIND_ORDER, "all"):
        fills = [f for f in report.fills if kind in ("all", f.kind)]
        if not fills or kind not in report.kinds:
            continue
        summary = report.kinds[kind]
        rows.append(StageRow(stage, kind, len(fills), sum(f.score.shown for f in fills),
                             sum(f.score.exact_ws for f in fills), summary.latency_p50_ms, summary.latency_p95_ms))
    return rows


TABLE_HEADER = ("| stage | kind | holes | shown % | exact % of holes | precision of shown % | wrong shown "
                "| p50 ms | p95 ms |\n|---|---|---|---|---|---|---|---|---|")


def table_line(row: StageRow) -> str:
    precision = row.precision
    shown_pct = 100 * row.shown / row.holes
    exact_pct = 100 * row.exact / row.holes
    return " | ".join([
        f"| {row.stage}", row.kind, str(row.holes), f"{shown_pct:.1f} ({row.shown})", f"{exact_pct:.1f} ({row.exact})",
        "n/a" if precision is None else f"{100 * precision:.1f} ({row.exact}/{row.shown})", str(row.wrong),
        f"{row.p50_ms:.0f}", f"{row.p95_ms:.0f} |"])


def _cell(text: str) -> str:
    """`text` as a code span inside a markdown table cell: pipes escaped, line breaks shown as ↵."""
    flat = text.replace("\n", "↵").replace("|", "\\|")
    fence = "``" if "`" in flat else "`"
    return f"{fence}{flat}{fence}" if flat.strip() else ""


def fills_markdown(stage: str, suite: Suite, holes: Sequence[SuiteHole], report: EvalReport) -> str:
    """Every shown fill beside its truth (✓ the same C tokens, ✗ not), then the holes where nothing was shown."""
    by_id = {h.id: h for h in holes}
    shown = [f for f in report.fills if f.score.shown]
    exact = sum(f.score.exact_ws for f in shown)
    lines = [f"# Shown fills: {stage}", "",
             f"{len(shown)} of {len(report.fills)} holes shown: {exact} exact (✓, the truth up to whitespace "
             f"between tokens), {len(shown) - exact} wrong (✗). `typed` is what stays typed on a midline hole's "
             "line; ↵ is a line break in a fill.", "",
             "| | hole | function | typed | truth | shown |", "|---|---|---|---|---|---|"]
    for row in shown:
        hole = by_id[row.hole]
        lines.append(" | ".join([
            "| ✓" if row.score.exact_ws else "| ✗", row.hole, hole.function, _cell(typed_prefix(suite, hole)),
            _cell(hole.truth(suite.text(hole))), _cell(row.fill or "") + " |"]))
    unshown = [row.hole for row in report.fills if not row.score.shown]
    lines += ["", f"Not shown ({len(unshown)}): " + (", ".join(unshown) if unshown else "none"), ""]
    return "\n".join(lines)


def stem_of(stage: str) -> str:
    """A file name for a stage, as bench/completion_pipeline.py names its reports."""
    return re.sub(r"[^0-9A-Za-z.]+", "_", stage.replace("+", "plus_")).strip("_")


def pipeline_stages() -> dict[str, Any]:
    """bench/completion_pipeline.py's stage table (pipeline and decoding changes per stage name), imported from
    beside this file so that both benchmarks run the same stages."""
    here = str(Path(__file__).resolve().parent)
    if here not in sys.path:
        sys.path.insert(0, here)
    from completion_pipeline import STAGES

    return dict(STAGES)


def default_stages(stages: dict[str, Any]) -> list[str]:
    """The model alone (`MODEL_STAGE`) and the product as it is now (the stage whose name ends in `(product)`):
    found by name, so that the default follows bench/completion_pipeline.py when its product stage moves on."""
    return [name for name in stages if name == MODEL_STAGE or name.endswith("(product)")]


def run_stage(suite: Suite, holes: list[SuiteHole], stage: str, model: Any, model_name: str,
              stages: dict[str, Any], progress: Callable[[int], object] | None = None) -> EvalReport:
    """One stage's report: every hole asked through `systems.ModelSystem` with the stage's pipeline and
    decoding, scored by `evaluate`; the report keeps where each hole lies (`hole_rows`).

    Each kernel is asked alone, as a file with no project around it: no workspace source (the other kernels of
    the set are not the user's project, and they hold the same idioms, which would be a leak)."""
    from dice_lsp.evals import systems
    from dice_lsp.evals.results import HoleRow
    from dice_lsp.evals.run import evaluate
    from dice_lsp.settings import Settings

    pipeline, changes = stages[stage]
    settings = replace(Settings(), **changes)
    system = systems.ModelSystem(stage, stage, model, settings, pipeline)
    report = evaluate(suite, holes, system, progress=progress,
                      settings={"suite": SUITE_NAME, "stage": stage, "model": model_name, **changes})
    return replace(report, hole_rows=[HoleRow(h.id, h.kind, h.file, h.start, h.end) for h in holes])


def baseline_rows(suite: Suite, holes: list[SuiteHole], out: Path) -> list[StageRow]:
    """The reference a model has to beat on these lines: `systems.idiom()`, the constant thread-index line,
    shown at every hole. Scored as the stages are, but with no file compile-checked (the table's measures do not
    use nvcc, and 120 compiles of the same line would tell nothing); its report goes to OUT/idiom_baseline.json."""
    from dice_lsp.evals import systems
    from dice_lsp.evals.run import evaluate

    files = {key: replace(file, compiles=None) for key, file in suite.files.items()}
    report = evaluate(Suite(suite.name, suite.split, files, suite.holes), holes, systems.idiom(),
                      settings={"suite": SUITE_NAME, "baseline": systems.IDIOM})
    (out / "idiom_baseline.json").write_text(json.dumps(report.to_json()) + "\n")
    return stage_rows(BASELINE, report)


def summary_json(suite: Suite, holes: Sequence[SuiteHole], folder: Path, model_name: str, device: str,
                 rows: Sequence[StageRow]) -> dict[str, Any]:
    """What `--json` prints and summary.json holds: the set's size, the model, and each stage's rows."""
    kinds = {kind: sum(h.kind == kind for h in holes) for kind in KIND_ORDER}
    stages: dict[str, dict[str, Any]] = {}
    for row in rows:
        stages.setdefault(row.stage, {})[row.kind] = row.to_json()
    root = Path(__file__).resolve().parents[1]
    shown = folder.resolve().relative_to(root) if folder.resolve().is_relative_to(root) else folder
    return {"suite": SUITE_NAME, "folder": str(shown), "kernels": len(suite.files),
            "holes": {**kinds, "all": len(holes)}, "model": model_name, "device": device, "stages": stages}


def _print_holes(suite: Suite) -> None:
    for hole in suite.holes:
        typed = typed_prefix(suite, hole)
        print(f"{hole.id:40} {typed}⟨{hole.truth(suite.text(hole))}⟩")
    kinds = ", ".join(f"{sum(h.kind == k for h in suite.holes)} {k}" for k in KIND_ORDER)
    print(f"{len(suite.files)} kernels, {len(suite.holes)} holes ({kinds})")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="folder for table.md, the reports and the fills (required to run)")
    parser.add_argument("--folder", type=Path, default=IDIOMS_ROOT, help="the kernels (default: bench/idioms)")
    parser.add_argument("--stages", nargs="+",
                        help=f"stages of bench/completion_pipeline.py (default: '{MODEL_STAGE}' and the stage "
                             "named '(product)')")
    parser.add_argument("--kinds", nargs="+", choices=KIND_ORDER, default=list(KIND_ORDER))
    parser.add_argument("--model", type=Path, help="checkpoint folder (default: the embedded model)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="auto", help="auto (the product's choice), float32, bfloat16")
    parser.add_argument("--no-compile-check", action="store_true",
                        help="do not ask nvcc about the files (no shown fill is then compile-checked)")
    parser.add_argument("--no-baseline", action="store_true",
                        help=f"leave out the row '{BASELINE}' (scored without nvcc: it needs no model)")
    parser.add_argument("--holes", action="store_true", help="list the holes and their truths, run nothing")
    parser.add_argument("--json", action="store_true", help="print the JSON summary instead of the table")
    args = parser.parse_args(argv)
    try:
        suite = load_idioms(args.folder, compile_check=not (args.no_compile_check or args.holes))
        if args.holes:
            _print_holes(suite)
            return 0
        if args.out is None:
            raise DiceError("--out DIR is required to run the benchmark (or --holes to list the set)")
        stages = pipeline_stages()
        args.stages = args.stages or default_stages(stages)
        unknown = [stage for stage in args.stages if stage not in stages]
        if unknown:
            raise DiceError(f"unknown stage {unknown[0]!r}; known: {', '.join(stages)}")
        if args.model is not None and not args.model.is_dir():
            raise DiceError(f"--model {args.model}: not a folder")
        return run(suite, args)
    except DiceError as exc:
        print(f"canonical_idioms: {exc}", file=sys.stderr)
        return 2


def run(suite: Suite, args: argparse.Namespace) -> int:
    """Every asked stage over the holes of the asked kinds; writes the outputs and prints the table (or JSON)."""
    from tqdm import tqdm

    from dice_lsp.engine import EMBEDDED_MODEL, load_model
    from dice_lsp.toolchain.header_index import header_names

    holes = [h for h in suite.holes if h.kind in args.kinds]
    folder = args.model or EMBEDDED_MODEL
    model_name = folder.name
    stages = pipeline_stages()
    header_names()  # built once per nvcc and cached, so that no stage waits for it
    model = load_model(folder, args.device, args.dtype, False)
    args.out.mkdir(parents=True, exist_ok=True)
    rows = [] if args.no_baseline else baseline_rows(suite, holes, args.out)
    for stage in args.stages:
        with tqdm(total=len(holes), desc=stage, unit="hole", file=sys.stderr) as bar:
            report = run_stage(suite, holes, stage, model, model_name, stages, bar.update)
        stem = stem_of(stage)
        (args.out / f"{stem}.json").write_text(json.dumps(report.to_json()) + "\n")
        (args.out / f"{stem}.fills.md").write_text(fills_markdown(stage, suite, holes, report))
        rows += stage_rows(stage, report)
    table = "\n".join([TABLE_HEADER, *(table_line(row) for row in rows)])
    (args.out / "table.md").write_text(table + "\n")
    summary = summary_json(suite, holes, args.folder, model_name, args.device, rows)
    (args.out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    if args.json:
        print(json.dumps(summary, indent=1))
    else:
        print(f"{SUITE_NAME}: {len(suite.files)} kernels, {len(holes)} holes, model {model_name} on {args.device}")
        print(table)
        print(f"written to {args.out}/ (table.md, summary.json, <stage>.json, <stage>.fills.md)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
