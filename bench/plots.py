"""The plots of docs/PERFORMANCE.md, drawn from the committed logs.

    .venv/bin/python bench/plots.py                 # -> docs/images/perf/*.png
    .venv/bin/python bench/plots.py --out /tmp/perf

Which runs are the current ones is written in docs/bench-logs/performance-current.json (each entry names its log
files, card, date and code); every number drawn is parsed from those files, none is written here. The completion
risk-coverage plot is bench/risk_coverage.py's, for the newest docs/bench-logs/pipeline/test_* run with a curve.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import statistics
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
LOGS = ROOT / "docs" / "bench-logs"
OUT = ROOT / "docs" / "images" / "perf"
MANIFEST = "performance-current.json"
TARGET_P50_MS = 350  # the one-line completion targets (docs/PERFORMANCE.md)
TARGET_P95_MS = 800


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def manifest(logs: Path = LOGS) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((logs / MANIFEST).read_text())
    return loaded


def _caption(figure: Any, text: str) -> None:
    figure.text(0.01, 0.01, text, fontsize=7, color="dimgray", ha="left", va="bottom", wrap=True)


def _save(figure: Any, out: Path, bottom: float = 0.1) -> Path:
    figure.tight_layout(rect=(0, bottom, 1, 1))
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out, dpi=110)
    _pyplot().close(figure)
    return out


# ---- parsers of the committed logs ----

def markdown_sections(text: str) -> dict[str, list[list[str]]]:
    """The tables of a log made of `== NAME ...` sections: per NAME, the data rows' cells (header and rule left out)."""
    sections: dict[str, list[list[str]]] = {}
    current: list[list[str]] | None = None
    for line in text.splitlines():
        if line.startswith("== "):
            current = sections.setdefault(line[3:].split()[0], [])
        elif current is not None and line.startswith("|") and not line.startswith("|---"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if cells and cells[0] != "request":
                current.append(cells)
    return sections


LEGACY_FLOOR = "floor (legacy): every weight, the embedding table included, at the copy bandwidth"
FLOOR = "floor: the weights but the input embedding table (its rows read), at the read bandwidth"


def replay_times(text: str) -> tuple[dict[str, float], float]:
    """`bench/static_step_replay.py`'s output: the median replay ms of each variant (alternating rounds) and the
    floor (ms per step; which floor, `floor_kind`)."""
    line = re.search(r"^replay ms, alternating: (.+)$", text, re.M)
    floor = re.search(r"^floor: ([\d.]+) ms per step", text, re.M)
    if not line or not floor:
        raise ValueError("no 'replay ms, alternating' / 'floor:' line (bench/static_step_replay.py's output)")
    variants = {}
    for part in line.group(1).split(";"):
        words = part.split()
        numbers = [float(w) for w in words if re.fullmatch(r"[\d.]+", w)]
        label = " ".join(w for w in words if not re.fullmatch(r"[\d.]+", w))
        variants[label] = statistics.median(numbers)
    return variants, float(floor.group(1))


def floor_kind(log: str | dict[str, Any]) -> str:
    """Which floor a log's ratios are to: `FLOOR` (bench/engine_latency.py's `step_floor`, logs from 2026-12-07)
    or `LEGACY_FLOOR` (every weight at the copy bandwidth, the logs before). `log`: static_step_replay.py's output,
    or engine_latency.py's JSON."""
    if isinstance(log, dict):
        return FLOOR if "floor_ms_per_step" in log["meta"] else LEGACY_FLOOR
    line = re.search(r"^floor: .*$", log, re.M)
    return FLOOR if line and "read bandwidth" in line.group(0) else LEGACY_FLOOR


def newest_test_run(logs: Path = LOGS) -> Path:
    """The newest `pipeline/test_*` folder holding a risk-coverage curve: by the date in its name, then by the
    commit that last touched it; ablations (`*_no_twins`) are left out."""
    folders = [d for d in (logs / "pipeline").glob("test_*") if d.is_dir() and any(d.glob("*.curve.json"))
               and not d.name.endswith("_no_twins")]
    if not folders:
        raise FileNotFoundError(f"no {logs / 'pipeline'}/test_* folder with a *.curve.json")

    def key(folder: Path) -> tuple[str, int, str]:
        date = re.search(r"\d{4}-\d{2}-\d{2}", folder.name)
        try:
            stamp = subprocess.run(["git", "log", "-1", "--format=%ct", "--", str(folder)], cwd=folder,
                                   capture_output=True, text=True, timeout=30).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            stamp = ""
        return (date.group(0) if date else "", int(stamp) if stamp.isdigit() else 0, folder.name)

    return max(folders, key=key)


def _bench_module(name: str) -> ModuleType:
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, Path(__file__).resolve().parent / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


# ---- the plots ----

def completion_latency(logs: Path, out: Path) -> Path:
    """(a) One-line completion latency on the CPU, p50 and p95 per configuration, against the targets."""
    entry = manifest(logs)["completion_latency"]
    rows: list[tuple[str, float, float]] = []
    pipe = entry["pipeline"]
    for name, label in pipe["reports"].items():
        kinds = json.loads((logs / pipe["folder"] / name).read_text())["kinds"][pipe["kind"]]
        rows.append((f"{label}\n{pipe['date']}", kinds["latency_p50_ms"], kinds["latency_p95_ms"]))
    lsp = entry["lsp"]
    sections = markdown_sections((logs / lsp["file"]).read_text())
    for request, label in lsp["rows"].items():
        for number, run in enumerate(lsp["runs"], 1):
            cells = next(c for c in sections[run] if c[0] == request)
            rows.append((f"{label}\nrun {number}, {lsp['date']}", float(cells[2]), float(cells[3])))
    plt = _pyplot()
    figure, axis = plt.subplots(figsize=(9, 0.52 * len(rows) + 1.8))
    ys = list(range(len(rows)))[::-1]
    axis.barh(ys, [r[2] for r in rows], color="#9ecae1", label="p95")
    axis.barh(ys, [r[1] for r in rows], color="#2171b5", height=0.5, label="p50")
    for y, (_, p50, p95) in zip(ys, rows, strict=True):
        axis.text(p95 + 10, y, f"{p50:.0f} / {p95:.0f}", va="center", fontsize=8)
    axis.axvline(TARGET_P50_MS, color="#2171b5", ls="--", lw=1, label=f"target p50 ≤ {TARGET_P50_MS} ms")
    axis.axvline(TARGET_P95_MS, color="tab:red", ls="--", lw=1, label=f"target p95 ≤ {TARGET_P95_MS} ms")
    axis.set_yticks(ys, [r[0] for r in rows], fontsize=8)
    axis.set_xlabel("milliseconds per completion (p50 / p95)")
    axis.set_xlim(0, max(r[2] for r in rows) * 1.15)
    axis.set_title(entry["title"], pad=28)
    axis.legend(fontsize=8, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=4, frameon=False)
    axis.grid(axis="x", alpha=0.3)
    _caption(figure, f"In-process: {pipe['what']} (docs/bench-logs/{pipe['folder']}). "
                     f"LSP: {lsp['what']}, code {lsp['code']} (docs/bench-logs/{lsp['file']}).")
    return _save(figure, out / "completion_latency.png", bottom=0.05)


def gpu_step(logs: Path, out: Path) -> Path:
    """(b) The SDAR-8B-shaped denoising step per card: captured replays and the engine's step against the floor."""
    entry = manifest(logs)["gpu_step"]
    plt = _pyplot()
    figure, axis = plt.subplots(figsize=(9, 4.8))
    names = ["torch operations", "Triton step kernels, cuBLAS products", "Triton step kernels and products"]
    colors = ["#bdbdbd", "#9ecae1", "#2171b5", "#fd8d3c"]
    width = 0.2
    captions = []
    floors_named: set[str] = set()
    for group, card in enumerate(entry["cards"]):
        replay_log = (logs / card["replay_log"]).read_text()
        variants, floor = replay_times(replay_log)
        engine = json.loads((logs / card["engine_json"]).read_text())
        graph = {r["tokens_per_step"]: r["ms_per_step"] for r in engine["rows"] if "CUDA graph" in r["engine"]}
        engine_floor = engine["meta"].get("floor_ms_per_step", engine["meta"].get("floor_ms_per_forward"))
        if floor_kind(engine) != floor_kind(replay_log):
            raise ValueError(f"{card['card']}: the replay log and the engine's JSON measure different floors")
        kind = floor_kind(replay_log)
        bars = [(f"captured step: {n}", variants[n], floor) for n in names]
        bars.append(("in the engine, 4 tokens per step (sampling included)", graph[4], engine_floor))
        for i, (label, ms, bar_floor) in enumerate(bars):
            x = group + (i - 1.5) * width
            axis.bar(x, ms, width, color=colors[i], label=label if group == 0 else None)
            axis.text(x, ms + 0.08, f"{ms:.2f}\n{ms / bar_floor:.2f}x", ha="center", fontsize=7)
        axis.hlines(floor, group - 2 * width, group + 2 * width, colors="black",
                    linestyles=":" if kind == LEGACY_FLOOR else "--", label=None if kind in floors_named else kind)
        floors_named.add(kind)
        captions.append(f"{card['card']} {card['date']}: replays {card['replay_log']} ({card['replay_code']}), "
                        f"engine {card['engine_json']} ({card['engine_code']})")
    axis.set_xticks(range(len(entry["cards"])),
                    [f"{c['card']} ({c['date']})" for c in entry["cards"]])
    axis.set_ylabel("ms per denoising step")
    axis.set_ylim(0, axis.get_ylim()[1] * 1.25)
    axis.set_title(entry["title"], fontsize=10)
    axis.legend(fontsize=7, loc="upper right")
    axis.grid(axis="y", alpha=0.3)
    _caption(figure, "Bars: ms per step and its ratio to the floor. Logs under docs/bench-logs/: "
             + "; ".join(captions))
    return _save(figure, out / "gpu_step.png")


def _server_rows(logs: Path, files: list[str]) -> dict[tuple[str, int], dict[str, Any]]:
    """(server, editors) -> row; the 1-editor phase is taken from the first file (the 8-editor run)."""
    rows: dict[tuple[str, int], dict[str, Any]] = {}
    for name in files:
        for row in json.loads((logs / name).read_text()):
            rows.setdefault((row["server"], row["clients"]), row)
    return rows


def server_load(logs: Path, out: Path) -> Path:
    """(c) The team server: throughput and p95 against the number of editors, batched and unbatched, per card."""
    entry = manifest(logs)["server_load"]
    plt = _pyplot()
    panels = entry["panels"]
    figure, axes = plt.subplots(2, len(panels), figsize=(5.2 * len(panels), 7), squeeze=False)
    colors = {"H100": "tab:green", "H200": "tab:purple"}
    captions = []
    for column, panel in enumerate(panels):
        for run in panel["runs"]:
            rows = _server_rows(logs, run["files"])
            color = colors.get(run["card"], "black")
            for server, style, face in (("batched", "-", color), ("unbatched", "--", "white")):
                points = sorted((editors, row) for (name, editors), row in rows.items() if name == server)
                xs = [e for e, _ in points]
                label = f"{run['card']} {server}"
                for row, key in ((0, "throughput_rps"), (1, "p95_ms")):
                    axes[row][column].plot(xs, [r[key] for _, r in points], style, marker="o", color=color,
                                           markerfacecolor=face, label=label)
            captions.append(f"{panel['model']}, {run['card']} {run['date']} ({run['code']}): {', '.join(run['files'])}")
        axes[0][column].set_title(panel["model"], fontsize=10)
        axes[0][column].set_ylabel("requests per second")
        axes[1][column].set_ylabel("p95 round trip (ms)")
        for row in (0, 1):
            axes[row][column].set_xlabel("editors at once (closed loop)")
            axes[row][column].set_xticks([1, 8, 16])
            axes[row][column].set_ylim(bottom=0)
            axes[row][column].grid(alpha=0.3)
        axes[0][column].legend(fontsize=7)
    figure.suptitle(entry["title"], fontsize=11)
    _caption(figure, "Under docs/bench-logs/: " + "; ".join(captions)
             + ". 1 editor: the single-editor phase of the 8-editor run.")
    return _save(figure, out / "server_load.png", bottom=0.07)


def cpu_dtypes(logs: Path, out: Path) -> Path:
    """(d) The embedded model's time per model call and per fill on the CPU, by arithmetic."""
    entry = manifest(logs)["cpu_dtypes"]
    rows = json.loads((logs / entry["file"]).read_text())
    plt = _pyplot()
    figure, axis = plt.subplots(figsize=(8, 4.2))
    xs = range(len(rows))
    axis.bar([x - 0.2 for x in xs], [r["batch1_ms"] for r in rows], 0.4, color="#9ecae1",
             label="one model call, 1 row (ms)")
    axis.bar([x + 0.2 for x in xs], [r["fill_ms"] for r in rows], 0.4, color="#2171b5",
             label="one fill, p50 (ms)")
    for x, r in zip(xs, rows, strict=True):
        axis.text(x + 0.2, r["fill_ms"] + 8, f"{r['fill_ms']:.0f}\n{r['fills_equal_fp32']}/{r['holes']} = fp32",
                  ha="center", fontsize=7)
        axis.text(x - 0.2, r["batch1_ms"] + 8, f"{r['batch1_ms']:.0f}", ha="center", fontsize=7)
    axis.set_xticks(list(xs), [r["compute"].replace(", ", ",\n") for r in rows], fontsize=8)
    axis.set_ylabel("milliseconds")
    axis.set_ylim(0, max(r["fill_ms"] for r in rows) * 1.25)
    axis.set_title(entry["title"], fontsize=10)
    axis.legend(fontsize=8)
    axis.grid(axis="y", alpha=0.3)
    _caption(figure, f"`python bench/cpu_dtypes.py --holes 24`, {entry['date']}; docs/bench-logs/{entry['file']}. "
                     "'N/24 = fp32': fills whose text equals fp32's.")
    return _save(figure, out / "cpu_dtypes.png")


def risk_coverage(logs: Path, out: Path, folder: Path | None = None) -> Path:
    """(e) Precision of shown completions against show rate, model only vs product: bench/risk_coverage.py's plot."""
    entry = manifest(logs)["risk_coverage"]
    if folder is None:
        folder = logs / entry["folder"] if entry.get("folder") else newest_test_run(logs)
    rc = _bench_module("risk_coverage")
    curve = json.loads(sorted(folder.glob("*.curve.json"))[0].read_text())
    filter_file = rc.EMBEDDED_MODEL / rc.FILE_NAME
    threshold = float(json.loads(filter_file.read_text())["threshold"]) if filter_file.is_file() else 0.0
    target = out / "risk_coverage.png"
    rc.plot(curve, rc.stage_points(folder), threshold, target,
            caption=f"Test split, 2-core CPU, dice-tiny; docs/bench-logs/pipeline/{folder.name}",
            exact=rc.product_at(folder, threshold))
    return target


PLOTS = (completion_latency, gpu_step, server_load, cpu_dtypes, risk_coverage)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT, help="folder of the PNGs (default docs/images/perf)")
    parser.add_argument("--logs", type=Path, default=LOGS, help="the committed logs (default docs/bench-logs)")
    args = parser.parse_args(argv)
    for draw in PLOTS:
        print(draw(args.logs, args.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
