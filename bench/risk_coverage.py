"""The risk-coverage plot of completions: precision of shown against show rate, per hole kind.

    python bench/risk_coverage.py docs/bench-logs/pipeline/<run> --plot docs/images/risk_coverage.png

Reads a `bench/completion_pipeline.py` output folder: the product's curve (the stage run at `dice.minConfidence`
0, `*.curve.json`: each threshold on P(right) gives a show rate and a precision), and every other stage's report
as one point (the pipelines before the show filter have no threshold to move). The product's own operating
point, the filter's threshold (`show_filter.json` beside the model), is marked; what the product shows there is
read from the P >= 0 run's fills (per kind, and both kinds together). Prints the table of points too.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

from dice_lsp.completion.decide import FILE_NAME
from dice_lsp.engine import EMBEDDED_MODEL
from dice_lsp.evals.results import EvalReport

KIND_NAMES = {"line": "one line (cursor on an emptied line)", "midline": "rest of a half-typed line"}
TARGET_PRECISION = 0.6
TARGET_SHOWN = 0.3


def stage_points(folder: Path) -> dict[str, dict[str, tuple[float, float]]]:
    """Per kind, per stage report in `folder` (not the P >= 0 run): (show rate, precision of shown)."""
    points: dict[str, dict[str, tuple[float, float]]] = {}
    for path in sorted(folder.glob("*.json")):
        if path.name.endswith(".curve.json"):
            continue
        report = EvalReport.from_json(json.loads(path.read_text()))
        if report.settings.get("min_confidence") == 0.0:
            continue
        for kind in {f.kind for f in report.fills}:
            fills = [f for f in report.fills if f.kind == kind]
            shown = [f for f in fills if f.score.shown]
            right = sum(f.score.exact_ws for f in shown)
            points.setdefault(kind, {})[report.label] = (len(shown) / len(fills),
                                                          right / len(shown) if shown else math.nan)
    return points


def at_threshold(curve: list[dict[str, float]], threshold: float) -> dict[str, float]:
    """The curve's point at the smallest threshold >= `threshold` (the stored curve is thinned: a reading of it
    shows at most what the product shows; `product_at` reads the fills themselves)."""
    above = [p for p in curve if p["threshold"] >= threshold]
    return above[0] if above else curve[-1]


def product_at(folder: Path, threshold: float) -> dict[str, dict[str, float]] | None:
    """What the product shows at `threshold`, read from the P >= 0 run's fills (each carries its P(right)), per
    kind and for both kinds together ("both": completed code weighs each hole by its truth's characters, read
    from the suite); None where the run has no such report."""
    from dice_lsp.evals.suite import load_suite

    for path in sorted(folder.glob("*.json")):
        if path.name.endswith(".curve.json"):
            continue
        data = json.loads(path.read_text())
        if data.get("settings", {}).get("min_confidence") != 0.0 or "fills" not in data:
            continue
        suite = load_suite(data["suite"], data["split"])
        holes = {hole.id: hole for hole in suite.holes}
        chars = {f["hole"]: len(holes[f["hole"]].truth(suite.text(holes[f["hole"]])).strip()) for f in data["fills"]}
        out: dict[str, dict[str, float]] = {}
        for kind in (*sorted({f["kind"] for f in data["fills"]}), "both"):
            fills = [f for f in data["fills"] if kind in ("both", f["kind"])]
            shown = [f for f in fills if f["shown"] and (f.get("confidence") or -1.0) >= threshold]
            right = [f for f in shown if f["exact_ws"]]
            out[kind] = {"threshold": threshold, "shown": len(shown) / len(fills),
                         "precision": len(right) / len(shown) if shown else math.nan,
                         "exact": len(right) / len(fills),
                         "completed": sum(chars[f["hole"]] for f in right) / (sum(chars[f["hole"]] for f in fills)
                                                                            or 1)}
        return out
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--plot", type=Path)
    parser.add_argument("--filter", type=Path, default=EMBEDDED_MODEL / FILE_NAME,
                        help="the show filter whose threshold is the product's operating point")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    curves = sorted(args.folder.glob("*.curve.json"))
    if not curves:
        print(f"risk_coverage: {args.folder}: no *.curve.json (run the P >= 0 stage)", file=sys.stderr)
        return 2
    curve: dict[str, list[dict[str, float]]] = json.loads(curves[0].read_text())
    threshold = float(json.loads(args.filter.read_text())["threshold"]) if args.filter.is_file() else 0.0
    points = stage_points(args.folder)
    summary: dict[str, Any] = {"threshold": threshold, "kinds": {}}
    exact = product_at(args.folder, threshold) or {}
    for kind in (*curve, *(["both"] if "both" in exact else [])):
        product = exact.get(kind) or at_threshold(curve[kind], threshold)
        summary["kinds"][kind] = {"product": product, "stages": points.get(kind, {})}
    if args.json:
        print(json.dumps(summary))
    else:
        for kind, data in summary["kinds"].items():
            product = data["product"]
            print(f"{kind}: product at P >= {threshold:.3f}: shown {100 * product['shown']:.1f}%, precision "
                  f"{100 * product['precision']:.1f}%, exact {100 * product['exact']:.1f}% of holes, completed code "
                  f"{100 * product['completed']:.1f}%")
            for label, (shown, precision) in data["stages"].items():
                print(f"  {label}: shown {100 * shown:.1f}%, precision {100 * precision:.1f}%")
    if args.plot:
        plot(curve, points, threshold, args.plot, exact=exact)
    return 0


def plot(curve: dict[str, list[dict[str, float]]], points: dict[str, dict[str, tuple[float, float]]],
         threshold: float, out: Path, caption: str | None = None,
         exact: dict[str, dict[str, float]] | None = None) -> None:
    """The curves per kind, the product's default point (`exact`'s reading where given, else the curve's) and
    the other stages' points."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    kinds = list(curve)
    figure, axes = plt.subplots(1, len(kinds), figsize=(5.2 * len(kinds), 4.2), squeeze=False)
    for axis, kind in zip(axes[0], kinds, strict=True):
        rows = [p for p in curve[kind] if not math.isnan(p["precision"])]
        axis.plot([100 * p["shown"] for p in rows], [100 * p["precision"] for p in rows], color="tab:blue",
                  label="product, threshold moved (dice.minConfidence)")
        product = (exact or {}).get(kind) or at_threshold(rows, threshold)
        axis.scatter([100 * product["shown"]], [100 * product["precision"]], color="tab:blue", zorder=3, s=50,
                     label=f"product default (P ≥ {threshold:.2f})")
        for (label, (shown, precision)), marker in zip(points.get(kind, {}).items(), "osD^v", strict=False):
            axis.scatter([100 * shown], [100 * precision], marker=marker, color="tab:gray", label=label, zorder=3)
        axis.axhline(100 * TARGET_PRECISION, color="tab:red", lw=0.8, ls="--")
        axis.axvline(100 * TARGET_SHOWN, color="tab:red", lw=0.8, ls="--", label="target (≥60% at ≥30% shown)")
        axis.set_xlim(0, 100)
        axis.set_ylim(0, 100)
        axis.set_xlabel("holes shown a completion (%)")
        axis.set_ylabel("shown completions exactly right (%)")
        axis.set_title(KIND_NAMES.get(kind, kind))
        axis.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7, loc="upper right")
    if caption:  # a line under the plots (bench/plots.py: the run and machine)
        figure.text(0.01, 0.01, caption, fontsize=7, color="dimgray", ha="left", va="bottom")
    figure.tight_layout(rect=(0, 0.05 if caption else 0, 1, 1))
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out, dpi=110)


if __name__ == "__main__":
    raise SystemExit(main())
