"""Train the completion show filter (`dice_lsp.completion.decide`) on labels made without users.

    python -m dice_lsp.training.show_filter collect --split dev --out data/show-filter/dev.jsonl.gz
    python -m dice_lsp.training.show_filter train --rows data/show-filter/dev.jsonl.gz \\
        --out dice_lsp/models/dice-tiny/show_filter.json --precision 0.6

`collect` asks the product's pipeline for every one-line hole of a CUDA-Infill split (line and mid-line; never
`test`, which measures the product), of a corpus split's files, or of a folder of kernels with marked holes
(`dice_lsp.evals.marked`: bench/idioms-dev, the textbook kernels' dev split; never bench/idioms, their measure),
the way the editor would (`dice_lsp.evals.systems`), keeps every candidate the sources propose and the checks pass
(the model's fills, the document's and the workspace's lines, the idiom bank's, a run of lines' next step), and
writes one row per candidate: its features (`features.FEATURES`), whether it is exactly the hole's text (white
space aside), and the hole it belongs to. The model's fills are cached by request (greedy decoding is
deterministic), so collecting again after a source changes costs seconds a hole less. The suite's workspace for a
file is the other files of its source project (`--twins` keeps parallel copies such as cuda/rocm twins).

`regions` reads reports of the product on a split's 2-5-line and body holes, asked with every candidate shown
(`python bench/completion_pipeline.py --split dev --kinds lines body --stages "+sources, every candidate (P >= 0)"`),
and stores in the filter the share of shown fills that were exact (Laplace-smoothed): the P(right) of a region
larger than a line (`decide.ShowFilter.region_chance`).

`train` fits a small LightGBM booster on the rows, out of fold by file (five folds; a file's holes share code),
calibrates its probabilities with isotonic regression on the out-of-fold predictions, and picks the threshold:
per hole the candidate with the highest P is shown when P >= t; the smallest t whose out-of-fold precision of
shown on the suite's dev holes (not the corpus windows', not the marked kernels') reaches `--precision` is
stored. The risk-coverage curve (precision against show rate, out of fold) is stored with the filter and printed.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import math
import sys
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dice_lsp.completion.decide import FILE_NAME, FORMAT
from dice_lsp.completion.features import FEATURES
from dice_lsp.errors import DiceError

PARAMS: dict[str, Any] = {"objective": "binary", "learning_rate": 0.05, "num_leaves": 8, "min_data_in_leaf": 20,
                          "feature_fraction": 0.8, "bagging_fraction": 0.8, "bagging_freq": 1, "lambda_l2": 1.0,
                          "verbose": -1, "seed": 0, "deterministic": True, "num_threads": 1}
ROUNDS = 150
MARKED = "marked/"  # a row of a folder of marked kernels has its file named so (the suite's are not)
FOLDS = 5
CORPUS_HOLES_PER_FILE = 3  # holes of each kind cut from one corpus file


@dataclass(frozen=True)
class Row:
    hole: str
    file: str
    kind: str
    truth_chars: int
    text: str
    source: str
    features: list[float]
    exact: bool


def _same(a: str, b: str) -> bool:
    return " ".join(a.split()) == " ".join(b.split())


class CachedFiller:
    """The model's fills by request, remembered in a gzipped JSON-lines file (greedy decoding: the same request
    gives the same fill)."""

    def __init__(self, model: Any, path: Path) -> None:
        from dice_lsp.engine import fill

        self.model, self.path, self.fill = model, path, fill
        self.known: dict[str, dict[str, Any]] = {}
        if path.is_file():
            with gzip.open(path, "rt", encoding="utf-8") as handle:
                for line in handle:
                    entry = json.loads(line)
                    self.known[entry["key"]] = entry

    def __call__(self, request: Any) -> Any:
        from dice_lsp.engine.fill_types import FillResult

        key = hashlib.sha256(repr(request).encode("utf-8", "surrogatepass")).hexdigest()
        if key not in self.known:
            result = self.fill(self.model, request)
            self.known[key] = {"key": key, "texts": result.texts, "scores": result.scores,
                               "calls": result.model_calls, "canvases": result.canvases}
        entry = self.known[key]
        return FillResult(texts=list(entry["texts"]), model_calls=int(entry["calls"]), scores=list(entry["scores"]),
                          canvases=list(entry.get("canvases", [])))

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as handle:
            for key in sorted(self.known):
                handle.write((json.dumps(self.known[key]) + "\n").encode("utf-8"))


def corpus_suite(path: Path, per_file: int = CORPUS_HOLES_PER_FILE, seed: int = 0) -> Any:
    """One-line holes cut from the CUDA files of a corpus split (`data/corpus/valid.jsonl`: files the model and the
    idiom bank were not trained on), as the suite builder cuts them (`training.suite_build.cut_holes`), at most
    `per_file` of each kind per file; a suite of their own ("corpus"), without a workspace."""
    import random

    from dice_lsp.evals.suite import Suite, SuiteFile, SuiteHole
    from dice_lsp.training.suite_build import cut_holes

    if not path.is_file():
        raise DiceError(f"{path}: no corpus split (python -m dice_lsp.training.corpus --out data/corpus)")
    rng = random.Random(seed)
    files: dict[str, SuiteFile] = {}
    holes: list[SuiteHole] = []
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            entry = json.loads(line)
            if entry.get("lang") != "cuda":
                continue
            file = SuiteFile(f"corpus/{entry['source']}/{entry['path']}", entry["source"], entry["path"],
                             entry.get("license", ""), entry["text"], None)
            files[file.id] = file
            cuts = cut_holes(file.text, rng)
            for kind in ("line", "midline"):
                mine = [h for h in cuts if h[0] == kind]
                for number, (_, start, end, function, template) in enumerate(rng.sample(mine, min(per_file,
                                                                                                   len(mine)))):
                    holes.append(SuiteHole(f"{file.id}#{kind}{number}", kind, file.id, start, end, function,
                                           template))
    return Suite("corpus", path.stem, files, holes)


def collect(split: str, out: Path, limit: int | None, twins: bool,
            progress: Callable[[int], object] | None = None) -> list[Row]:
    """One row per checked candidate of every one-line hole of `split` (see the module docstring); `split` is a
    CUDA-Infill split, or a corpus split's JSON-lines file (`corpus_suite`)."""
    from dice_lsp.complete import PRODUCT, PreparedFill, feature_rows, fill_request, model_sources, suggestions
    from dice_lsp.complete import with_sources as add_sources
    from dice_lsp.engine import EMBEDDED_MODEL, load_model
    from dice_lsp.evals.marked import load_marked
    from dice_lsp.evals.suite import load_suite
    from dice_lsp.evals.systems import document_for, region_for
    from dice_lsp.settings import Settings
    from dice_lsp.textdoc import position_at
    from dice_lsp.toolchain.header_index import header_names

    if split == "test" or _is_measure(Path(split)):
        raise DiceError(f"{split} measures the product: the show filter is never trained on it")
    in_corpus = split.endswith(".jsonl")
    marked = Path(split).is_dir()
    suite = (corpus_suite(Path(split)) if in_corpus else load_marked(Path(split), compile_check=False) if marked
             else load_suite("cuda-infill", split))
    holes = suite.select(["line", "midline"], limit)
    header_names()
    model = load_model(EMBEDDED_MODEL, "cpu", "auto", False)
    filler = CachedFiller(model, out.with_name(out.name.replace(".jsonl.gz", "") + ".fills.jsonl.gz"))
    settings = Settings()
    workspace = _workspace_sources(twins) if not (in_corpus or marked) else (lambda _file: ())
    rows: list[Row] = []
    for done, hole in enumerate(holes, 1):
        had = len(rows)
        file_id = f"{MARKED}{hole.file}" if marked else hole.file  # (corpus files are named corpus/...)
        text = suite.text(hole)
        document = document_for(text, hole)
        region = region_for(document, hole)
        if region is not None:
            request, context = fill_request(model.tokenizer, model.window, document, region, settings)
            prepared = PreparedFill(request, context, position_at(document, region.start),
                                    position_at(document, region.end), 0.0,
                                    sources=(*workspace(suite.files[hole.file]), *model_sources(model.path)))
            result = filler(request)
            found = suggestions(result.texts, result.scores, context, prepared.checker)
            found = [s for s in add_sources(found, prepared, prepared.checker, PRODUCT, True) if s.shown]
            truth = hole.truth(text)
            for suggestion, values in zip(found, feature_rows(found, context, prepared.checker),
                                            strict=True):
                rows.append(Row(hole.id, file_id, hole.kind, len(truth), suggestion.text, suggestion.source,
                                values, _same(suggestion.text, truth)))
        if len(rows) == had:  # nothing to show: the hole still counts
            rows.append(Row(hole.id, file_id, hole.kind, len(hole.truth(text)), "", "", [], False))
        if progress is not None:
            progress(1)
        if done % 100 == 0:
            filler.save()
    filler.save()
    write_rows(out, rows)
    return rows


def _is_measure(path: Path) -> bool:
    """The canonical-idioms benchmark (bench/idioms), which measures the product like the test split."""
    return path.is_dir() and path.resolve() == (Path(__file__).resolve().parents[2] / "bench" / "idioms")


def _workspace_sources(twins: bool) -> Callable[[Any], tuple[Any, ...]]:
    """For a suite file, the workspace source of its project's other files (none when the index is not there)."""
    try:
        from dice_lsp.evals.workspaces import workspace_for
    except ImportError:
        return lambda _file: ()
    return lambda file: (workspace_for(file, twins=twins),)


def write_rows(path: Path, rows: Sequence[Row]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as handle:
        for row in rows:
            handle.write((json.dumps(row.__dict__) + "\n").encode("utf-8"))


def read_rows(path: Path) -> list[Row]:
    if not path.is_file():
        raise DiceError(f"{path}: no rows (run `collect` first)")
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return [Row(**json.loads(line)) for line in handle if line.strip()]


def isotonic(raw: Sequence[float], labels: Sequence[bool]) -> tuple[list[float], list[float]]:
    """Pool-adjacent-violators: the non-decreasing step function of `raw` closest to `labels` (least squares), as
    (raw, calibrated) points at each block's mean raw value."""
    order = sorted(range(len(raw)), key=lambda i: raw[i])
    blocks: list[list[float]] = []  # [sum of labels, count, sum of raw]
    for i in order:
        blocks.append([float(labels[i]), 1.0, raw[i]])
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] >= blocks[-1][0] / blocks[-1][1]:
            top = blocks.pop()
            blocks[-1] = [blocks[-1][0] + top[0], blocks[-1][1] + top[1], blocks[-1][2] + top[2]]
    return [b[2] / b[1] for b in blocks], [b[0] / b[1] for b in blocks]


def _fit(rows: Sequence[Row]) -> Any:
    import lightgbm
    import numpy as np

    data = lightgbm.Dataset(np.asarray([r.features for r in rows], dtype=np.float64),
                            np.asarray([r.exact for r in rows], dtype=np.float64), feature_name=list(FEATURES))
    return lightgbm.train(PARAMS, data, ROUNDS)


def _folds(rows: Sequence[Row]) -> list[int]:
    """A fold per row, by file (hashed: stable across runs and row orders)."""
    return [int(hashlib.sha256(r.file.encode()).hexdigest(), 16) % FOLDS for r in rows]


def out_of_fold(rows: Sequence[Row]) -> list[float]:
    """Each candidate row's raw P from a booster trained on the other folds' files."""
    import numpy as np

    folds = _folds(rows)
    predicted = [math.nan] * len(rows)
    for fold in range(FOLDS):
        train = [r for r, f in zip(rows, folds, strict=True) if f != fold]
        test = [i for i, f in enumerate(folds) if f == fold]
        if not train or not test:
            continue
        booster = _fit(train)
        values = booster.predict(np.asarray([rows[i].features for i in test], dtype=np.float64))
        for i, value in zip(test, values, strict=True):
            predicted[i] = float(value)
    return predicted


@dataclass(frozen=True)
class Point:
    threshold: float
    shown: float  # share of holes with a shown candidate
    precision: float  # exact among shown
    exact: float  # exact shown among all holes
    completed: float  # characters of exact shown fills / characters of all holes


def curve(holes: dict[str, list[tuple[Row, float]]], thresholds: Sequence[float]) -> list[Point]:
    """Per threshold: each hole shows its most likely candidate when its P reaches the threshold."""
    best = {hole: max(cands, key=lambda c: c[1]) if any(r.features for r, _ in cands) else None
            for hole, cands in holes.items()}
    total_chars = sum(cands[0][0].truth_chars for cands in holes.values()) or 1
    points = []
    for t in thresholds:
        shown = [b for b in best.values() if b is not None and b[0].features and b[1] >= t]
        right = [b for b in shown if b[0].exact]
        points.append(Point(round(t, 4), len(shown) / len(holes), len(right) / len(shown) if shown else math.nan,
                            len(right) / len(holes), sum(b[0].truth_chars for b in right) / total_chars))
    return points


def by_hole(rows: Sequence[Row], chances: Sequence[float]) -> dict[str, list[tuple[Row, float]]]:
    grouped: dict[str, list[tuple[Row, float]]] = defaultdict(list)
    for row, chance in zip(rows, chances, strict=True):
        grouped[row.hole].append((row, chance if row.features else -1.0))
    return grouped


def train(rows: list[Row], target: float) -> dict[str, Any]:
    """The filter's JSON (`dice_lsp.completion.decide.ShowFilter.from_json`) trained on `rows` (the dev split's,
    corpus windows' and marked kernels'); the threshold and the stored curve are the suite's dev holes' alone, out
    of fold (corpus windows and the textbook kernels teach the booster, but real code is what a threshold for a
    precision must hold on: the textbook holes' precise candidates would let it slip there)."""
    candidates = [r for r in rows if r.features]
    if not candidates or not any(r.exact for r in candidates):
        raise DiceError("no candidate rows with an exact candidate: nothing to learn from")
    raw = out_of_fold(candidates)
    points_raw, points_cal = isotonic(raw, [r.exact for r in candidates])
    from dice_lsp.completion.decide import Calibration

    calibration = Calibration(tuple(points_raw), tuple(points_cal))
    calibrated = iter(calibration(p) for p in raw)
    chances = [next(calibrated) if r.features else -1.0 for r in rows]
    on_dev = [(r, c) for r, c in zip(rows, chances, strict=True) if not r.file.startswith(("corpus/", MARKED))]
    grouped = by_hole([r for r, _ in on_dev] or rows, [c for _, c in on_dev] or chances)
    thresholds = sorted({round(c, 4) for c in chances if c >= 0} | {0.0})
    points = curve(grouped, thresholds)
    reaching = [p for p in points if not math.isnan(p.precision) and p.precision >= target and p.shown > 0]
    chosen = min(reaching, key=lambda p: p.threshold) if reaching else max(points, key=lambda p: p.threshold)
    booster = _fit(candidates)
    return {
        "format": FORMAT, "features": list(FEATURES), "booster": booster.model_to_string(),
        "calibration": {"raw": [round(v, 6) for v in points_raw], "calibrated": [round(v, 6) for v in points_cal]},
        "threshold": chosen.threshold, "target_precision": target,
        "trained_on": {"holes": len({r.hole for r in rows}), "candidates": len(candidates),
                       "exact_candidates": sum(r.exact for r in candidates),
                       "corpus_holes": len({r.hole for r in rows if r.file.startswith("corpus/")})},
        "curve_holes": len(grouped),
        "out_of_fold": [p.__dict__ for p in _thinned(points)],
    }


def _thinned(points: list[Point], count: int = 40) -> list[Point]:
    """At most about `count` points of the curve, evenly by show rate (the stored curve is for reading)."""
    kept: list[Point] = []
    for point in points:
        if not kept or abs(kept[-1].shown - point.shown) >= 1 / count or point is points[-1]:
            kept.append(point)
    return kept


def _table(points: list[Point]) -> str:
    lines = ["| P ≥ | shown % | precision % | exact % of holes | completed code % |", "|---|---|---|---|---|"]
    lines += [f"| {p.threshold:.2f} | {100 * p.shown:.1f} | {100 * p.precision:.1f} | {100 * p.exact:.1f} | "
              f"{100 * p.completed:.1f} |" for p in points if not math.isnan(p.precision)]
    return "\n".join(lines)


REGION_KINDS = ("lines", "body")  # the suite's holes asked as regions larger than a line


def regions(reports: Sequence[Path]) -> dict[str, Any]:
    """Holes, shown fills and exact shown fills of the region kinds in `reports` (evaluation reports' `fills`), and
    the Laplace-smoothed share of shown fills that were exact."""
    holes = shown = exact = 0
    for path in reports:
        report = json.loads(path.read_text(encoding="utf-8"))
        if report.get("split") == "test":
            raise DiceError(f"{path}: a test-split report; the filter is never fitted to the test split")
        for fill in report.get("fills", []):
            if fill.get("kind") in REGION_KINDS:
                holes += 1
                shown += bool(fill.get("shown"))
                exact += bool(fill.get("shown") and fill.get("exact_ws"))
    if not holes:
        raise DiceError(f"no {' or '.join(REGION_KINDS)} holes in the reports")
    return {"holes": holes, "shown": shown, "exact": exact, "p_exact": round((exact + 1) / (shown + 2), 4)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dice_lsp.training.show_filter",
                                     description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    take = commands.add_parser("collect", help="candidate rows of a split's one-line holes")
    take.add_argument("--split", default="dev",
                      help="a CUDA-Infill split (dev), a corpus split's file (data/corpus/valid.jsonl), or a folder "
                           "of kernels with marked holes (bench/idioms-dev)")
    take.add_argument("--out", type=Path, required=True)
    take.add_argument("--limit", type=int, help="the first N holes of each kind")
    take.add_argument("--twins", action="store_true", help="the workspace keeps parallel copies (cuda/rocm twins)")
    take.add_argument("--json", action="store_true")
    fit = commands.add_parser("train", help="fit, calibrate and pick the threshold")
    fit.add_argument("--rows", type=Path, nargs="+", required=True, help="collected rows (several: all of them)")
    fit.add_argument("--out", type=Path, required=True, help=f"the filter's JSON (a model folder's {FILE_NAME})")
    fit.add_argument("--precision", type=float, default=0.6, help="target precision of shown (0-1)")
    fit.add_argument("--json", action="store_true")
    region = commands.add_parser("regions", help="store the share of right multi-line fills in a filter")
    region.add_argument("--reports", type=Path, nargs="+", required=True,
                        help="evaluation reports (JSON) of a dev run on lines and body holes, every candidate shown")
    region.add_argument("--filter", type=Path, required=True, help=f"the filter's JSON to update ({FILE_NAME})")
    region.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    try:
        if args.command == "collect":
            if args.limit is not None and args.limit < 1:
                raise DiceError("--limit must be at least 1")
            if args.split == "test":
                raise DiceError("the test split measures the product: the show filter is never trained on it")
            from tqdm import tqdm

            with tqdm(desc="holes", unit="hole", file=sys.stderr) as bar:
                rows = collect(args.split, args.out, args.limit, args.twins, bar.update)
            summary = {"rows": sum(1 for r in rows if r.features), "holes": len({r.hole for r in rows}),
                       "exact rows": sum(r.exact for r in rows), "out": str(args.out)}
            print(json.dumps(summary) if args.json else f"{summary['rows']} candidates of {summary['holes']} holes "
                  f"({summary['exact rows']} exact) -> {args.out}")
            return 0
        if args.command == "regions":
            found = regions(args.reports)
            try:
                data = json.loads(args.filter.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise DiceError(f"{args.filter}: not a show filter ({exc})") from exc
            data["regions"] = found
            args.filter.write_text(json.dumps(data, indent=0, sort_keys=True) + "\n", encoding="utf-8")
            print(json.dumps(found) if args.json else f"{found['exact']} of {found['shown']} shown fills right "
                  f"({found['holes']} holes): P(right) {found['p_exact']} -> {args.filter}")
            return 0
        if not 0 < args.precision < 1:
            raise DiceError("--precision must be between 0 and 1")
        data = train([row for path in args.rows for row in read_rows(path)], args.precision)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(data, indent=0, sort_keys=True) + "\n", encoding="utf-8")
        points = [Point(**p) for p in data["out_of_fold"]]
        if args.json:
            print(json.dumps({k: v for k, v in data.items() if k not in ("booster", "calibration")}))
        else:
            print(_table(points))
            print(f"threshold {data['threshold']:.3f} for precision ≥ {args.precision:.0%} (out of fold) -> {args.out}")
        return 0
    except DiceError as exc:
        print(f"show_filter: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
