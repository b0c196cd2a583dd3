"""Tables and a plot from CUDA-Infill reports (`EvalReport`s: what `dice-lsp eval infill --json` prints, read back).

One row per system and hole kind, every rate with its 95% bootstrap interval, so that two systems are
compared side by side from reports of the same suite; `plot` draws the rates by kind, one colour per
system, intervals as error bars.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from dice_lsp.errors import DiceError
from dice_lsp.evals.results import EvalReport
from dice_lsp.evals.stats import Interval, summarise

RATES = (("exact", "exact"), ("exact_ws", "exact (tokens)"), ("first_line", "first line"),
         ("similarity", "edit sim."), ("parses", "parses"), ("compile_rate", "compiles"),
         ("pass_rate", "passes (GPU)"), ("show_rate", "shown"), ("shown_precision", "shown precision"),
         ("shown_valid", "shown valid"))
COUNTED = ("compile_rate", "pass_rate", "shown_precision", "shown_valid")  # rates over a subset of the holes
PLOTTED = ("exact_ws", "similarity", "parses", "compile_rate", "pass_rate", "shown_precision")


def cell(value: Interval | None, percent: bool = True, count: bool = False) -> str:
    """`12.3 [9.1, 15.8]` (percent) for an interval, with its number of holes when `count`; `n/a` where
    nothing was measured."""
    if value is None or not value.n:
        return "n/a"
    scale, digits = (100, 1) if percent else (1, 2)
    text = f"{value.mean * scale:.{digits}f} [{value.low * scale:.{digits}f}, {value.high * scale:.{digits}f}]"
    return f"{text} of {value.n}" if count else text


def markdown(reports: list[EvalReport], kinds: list[str] | None = None) -> str:
    """One table: system × kind rows, every metric's interval, CPU latency percentiles."""
    head = ["system", "kind", "holes", *(f"{title} %" if key != "similarity" else title for key, title in RATES),
            "p50 ms", "p95 ms"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for report in reports:
        for kind, row in report.kinds.items():
            if kinds and kind not in kinds:
                continue
            cells = [cell(row.rate(key), key != "similarity", key in COUNTED) for key, _ in RATES]
            lines.append(f"| {report.label} | {kind} | {row.holes} | " + " | ".join(cells)
                         + f" | {row.latency_p50_ms:.0f} | {row.latency_p95_ms:.0f} |")
    return "\n".join(lines)


def resummarised(report: EvalReport) -> EvalReport:
    """`report` with its per-kind summary made again from its fills, so that a table always uses the
    metrics as `stats` defines them now (a report keeps every fill's verdicts and latency)."""
    if not report.fills:
        return report
    return replace(report, kinds=summarise([(row.suite_hole(), row.score, float(row.latency_ms))
                                            for row in report.fills]))


def with_passes(reports: list[EvalReport], executed: list[EvalReport]) -> list[EvalReport]:
    """`reports` with each kind's pass rate taken from the report of the same system in `executed` (a run of
    the executable holes on a GPU machine), for systems whose fills were made where there is no GPU."""
    runs = {report.system: report for report in executed}
    merged = []
    for report in reports:
        run = runs.get(report.system)
        kinds = {}
        for kind, row in report.kinds.items():
            source = run.kinds.get(kind) if run else row
            kinds[kind] = replace(row, pass_rate=source.pass_rate if source else None)
        merged.append(replace(report, kinds=kinds))
    return merged


def plot(reports: list[EvalReport], path: Path) -> None:
    """A PNG: one panel per metric, hole kinds on the x axis, one bar per system with its interval."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise DiceError("--plot needs matplotlib (pip install 'dice-lsp[bench]')") from exc
    kinds = [k for k in reports[0].kinds if k != "all"]
    figure, axes = plt.subplots(2, 3, figsize=(15, 8), sharey=True)
    width = 0.8 / max(1, len(reports))
    for axis, metric in zip(axes.flat, PLOTTED, strict=True):
        for index, report in enumerate(reports):
            values = [row.rate(metric) if (row := report.kinds.get(k)) else None for k in kinds]
            means = [v.mean if v and v.n else 0.0 for v in values]
            errors = [[m - v.low if v else 0.0 for m, v in zip(means, values, strict=True)],
                      [v.high - m if v else 0.0 for m, v in zip(means, values, strict=True)]]
            positions = [k + (index - (len(reports) - 1) / 2) * width for k in range(len(kinds))]
            axis.bar(positions, means, width, yerr=errors, capsize=2, label=report.label)
        axis.set_title(dict(RATES)[metric])
        axis.set_xticks(range(len(kinds)), kinds)
        axis.set_ylim(0, 1)
        axis.grid(axis="y", alpha=0.3)
    axes.flat[0].legend(fontsize=7, loc="upper right")
    figure.suptitle("CUDA-Infill (test split): rates by hole kind, 95% bootstrap intervals")
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
