"""The workspace source's cost and worth: how long a 2,000-file workspace takes to index and how much memory the
index holds, how long a lookup takes, and how often its top candidate is the hole's line on the dev split.

    python bench/workspace_index.py speed [--files 2000] [--holes 600]     # index time, memory, lookup latency
    python bench/workspace_index.py dev                                     # top-1 exact by score bucket
    python bench/workspace_index.py all                                     # both; --out FOLDER to choose

`speed` writes a workspace of `--files` files to a temporary folder: the library files of CUDA-Infill's two
splits, repeated under `copy<k>/` folders until there are enough (their own paths kept below that; in every copy
but the first, names are renamed so that lines do not repeat across copies, the worst case for memory), plus a
`.gitignore` and an ignored `build/` copy, so the walk's rules are exercised. A child process (so its memory is
the indexer's alone, not the suite's) indexes it with `WorkspaceIndexer` as the language server would, in its
background thread, and reports the wall time and the process's peak RSS over the bare interpreter; the same
files are then indexed once more under `tracemalloc` (slower: its time is not reported) for the bytes the index
itself holds. Lookups: the dev split's line and mid-line holes, each in the copy of its own file (excluded, as
the editor excludes the file being edited), timed one by one on the finished index, then again while a second
indexer builds a fresh index of the same folder (what a completion sees in the first seconds after a folder
opens: the index's lock and the interpreter shared with the indexing thread).

`dev` asks the workspace source alone, for each one-line hole of the dev split (`line`, `midline`), in the
workspace of the hole's own project (`workspace_for`: the other library files of its source, both splits), with
and without the file's parallel copies (`twins=False`), and tabulates its top candidate by score bucket: how
many holes, how many exact (whitespace-insensitive, the truth), and the same split by the candidate's `files`
(1: one file has it after that context; 2+: several) and by its `rivals` (another line follows an equally good
context). Never run on the test split's holes.

Results go to OUT (default docs/bench-logs/workspace/<today>/): speed.md, speed.json, dev.md, dev.json.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections import Counter
from pathlib import Path
from typing import Any

from dice_lsp.completion.sources.workspace import (
    WorkspaceCandidate,
    WorkspaceIndex,
    WorkspaceIndexer,
)
from dice_lsp.evals.suite import SPLITS, SuiteHole, load_suite
from dice_lsp.evals.workspaces import workspace_for

ROOT = Path(__file__).resolve().parents[1]
BUCKETS = ("1.0", "0.9", "0.8", "0.7", "0.6", "0.5", "<0.5", "none")
COLUMNS = ("files 1", "files 2+", "alone", "rivals")


def _document_for(text: str, hole: SuiteHole) -> str:
    """`dice_lsp.evals.systems.document_for` (the file with the truth removed), imported only when needed: the
    measuring child process must not load the model's modules (its memory is the index's)."""
    from dice_lsp.evals.systems import document_for

    return document_for(text, hole)


def _normal(text: str) -> str:
    return "".join(text.split())


def _bucket(candidates: list[WorkspaceCandidate]) -> str:
    if not candidates:
        return "none"
    score = candidates[0].score
    if score >= 1.0:
        return "1.0"
    return f"{int(score * 10) / 10:.1f}" if score >= 0.5 else "<0.5"


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


# -- speed ----------------------------------------------------------------------------------------------------

KEPT_NAMES = frozenset([  # keywords and CUDA built-ins: the same in every file
    "const", "float", "double", "return", "while", "break", "continue", "unsigned", "signed", "static", "struct",
    "class", "template", "typename", "inline", "sizeof", "switch", "default", "namespace", "include", "define",
    "endif", "ifdef", "ifndef", "else", "typedef", "auto", "bool", "true", "false", "nullptr", "public", "private",
    "size_t", "int8_t", "int16_t", "int32_t", "int64_t", "uint8_t", "uint32_t", "uint64_t", "__global__",
    "__device__", "__host__", "__shared__", "__syncthreads", "__forceinline__", "threadIdx", "blockIdx", "blockDim",
    "gridDim", "warpSize", "cudaStream_t",
])
_NAME = re.compile(r"\b[A-Za-z_]\w{4,}\b")


def renamed(text: str, copy: int) -> str:
    """`text` with its names of five letters or more (not keywords or CUDA built-ins) suffixed `_c<copy>`: a
    copy that shares almost no line with the original, as different files of a project do (the worst case for
    the index's memory: nothing is shared)."""
    if copy == 0:
        return text
    return _NAME.sub(lambda m: m.group(0) if m.group(0) in KEPT_NAMES else f"{m.group(0)}_c{copy}", text)


def write_workspace(folder: Path, files: int) -> dict[str, str]:
    """The suite's library files repeated under copy<k>/ up to `files` files, names renamed in every copy but
    the first (`renamed`); returns dev file id -> its path in copy0 (where its holes are asked)."""
    library = [f for split in SPLITS for f in load_suite("cuda-infill", split).files.values() if not f.launch]
    where: dict[str, str] = {}
    written = 0
    copy = 0
    while written < files:
        for file in library:
            if written >= files:
                break
            path = folder / f"copy{copy}" / file.path
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(renamed(file.text, copy), encoding="utf-8")
            written += 1
        copy += 1
    dev = load_suite("cuda-infill", "dev")
    for file in dev.files.values():
        if not file.launch:
            where[file.id] = str((folder / "copy0" / file.path).resolve())
    (folder / ".gitignore").write_text("# build outputs\nbuild/\n*.o\n", encoding="utf-8")
    ignored = folder / "build" / library[0].path
    ignored.parent.mkdir(parents=True, exist_ok=True)
    ignored.write_text(library[0].text, encoding="utf-8")
    return where


def _rss_kib(field: str = "VmHWM") -> int:
    """This process's peak (VmHWM) or current (VmRSS) resident memory, KiB. Not `ru_maxrss`: on Linux that
    keeps the parent's peak across fork and exec."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _holes(where: dict[str, str], limit: int) -> list[tuple[str, str, str]]:
    """(before, after, path of the hole's file) for the dev split's one-line holes in library files."""
    dev = load_suite("cuda-infill", "dev")
    chosen: list[SuiteHole] = [h for h in dev.select(["line", "midline"]) if h.file in where][:limit]
    out = []
    for hole in chosen:
        document = _document_for(dev.text(hole), hole)
        out.append((document[:hole.start], document[hole.start:], where[hole.file]))
    return out


def _lookups(index: WorkspaceIndex, holes: list[tuple[str, str, str]],
             pause_s: float = 0.0) -> tuple[list[float], list[float]]:
    """Each hole's lookup time: wall clock, and this thread's CPU time (what the lookup costs, however busy the
    machine is)."""
    wall, cpu = [], []
    for before, after, path in holes:
        start, start_cpu = time.perf_counter(), time.thread_time()
        index.candidates(before, after, 3, exclude=path)
        wall.append(time.perf_counter() - start)
        cpu.append(time.thread_time() - start_cpu)
        if pause_s:
            time.sleep(pause_s)
    return wall, cpu


def measure(folder: Path, holes_path: Path) -> dict[str, Any]:
    """Run in a child process: index `folder`, measure, return the numbers."""
    load_before = os.getloadavg()
    holes: list[tuple[str, str, str]] = [(b, a, p) for b, a, p in json.loads(holes_path.read_text())]
    base_rss = _rss_kib("VmRSS")
    index = WorkspaceIndex()
    reports: list[tuple[int, int]] = []
    indexer = WorkspaceIndexer(folder, index, trusted=True, progress=lambda d, t: reports.append((d, t)))
    start = time.perf_counter()
    cpu_start = time.process_time()
    indexer.start()
    indexer.wait()
    wall = time.perf_counter() - start
    cpu = time.process_time() - cpu_start
    indexer.stop()
    peak_rss = _rss_kib()
    done, done_cpu = _lookups(index, holes)

    busy_index = WorkspaceIndex()
    busy = WorkspaceIndexer(folder, busy_index, trusted=True)
    during: list[float] = []
    during_cpu: list[float] = []
    busy.start()
    while not busy.wait(0):
        wall_times, cpu_times = _lookups(busy_index, holes[:20], pause_s=0.01)
        during.extend(wall_times)
        during_cpu.extend(cpu_times)
    busy.stop()
    busy_files = len(busy_index)
    del busy_index, busy
    files, lines = len(index), index.lines
    del index, indexer
    gc.collect()

    tracemalloc.start()
    traced_base = tracemalloc.get_traced_memory()[0]
    traced = WorkspaceIndex()
    tracer = WorkspaceIndexer(folder, traced, trusted=True)
    tracer.start()
    tracer.wait()
    tracer.stop()
    gc.collect()
    held = tracemalloc.get_traced_memory()[0] - traced_base
    tracemalloc.stop()
    text_bytes = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and "build" not in p.parts)
    return {
        "files": files, "lines": lines, "files_during_busy_run": busy_files, "text_mib": text_bytes / 2**20,
        "index_wall_s": wall, "index_cpu_s": cpu, "progress_reports": len(reports),
        "last_progress": reports[-1] if reports else None,
        "peak_rss_mib": peak_rss / 1024, "rss_over_interpreter_mib": (peak_rss - base_rss) / 1024,
        "index_tracemalloc_mib": held / 2**20,
        "lookups": len(done), "lookup_p50_ms": 1e3 * statistics.median(done),
        "lookup_p95_ms": 1e3 * _percentile(done, 0.95), "lookup_max_ms": 1e3 * max(done),
        "lookup_cpu_p50_ms": 1e3 * statistics.median(done_cpu), "lookup_cpu_p95_ms": 1e3 * _percentile(done_cpu, 0.95),
        "lookups_during_indexing": len(during),
        "during_p50_ms": 1e3 * statistics.median(during) if during else None,
        "during_p95_ms": 1e3 * _percentile(during, 0.95) if during else None,
        "during_cpu_p50_ms": 1e3 * statistics.median(during_cpu) if during else None,
        "during_cpu_p95_ms": 1e3 * _percentile(during_cpu, 0.95) if during else None,
        "cpus": len(os.sched_getaffinity(0)), "load_avg_before": load_before,
        "load_avg_after": os.getloadavg(),
    }


def _loads(loads: list[float]) -> str:
    return "/".join(f"{x:.1f}" for x in loads)


def speed(out: Path, files: int, holes: int) -> dict[str, Any]:
    folder = Path(tempfile.mkdtemp(prefix="dice-workspace-bench-"))
    try:
        where = write_workspace(folder, files)
        holes_path = folder.parent / f"{folder.name}.holes.json"
        holes_path.write_text(json.dumps(_holes(where, holes)))
        child = subprocess.run([sys.executable, __file__, "_measure", str(folder), str(holes_path)],
                               check=True, capture_output=True, text=True)
        result: dict[str, Any] = json.loads(child.stdout)
        holes_path.unlink()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    during_ok = result["during_cpu_p50_ms"] is not None
    rows = [
        ("files indexed (of a 2,000-file folder; build/ ignored)", f"{result['files']}"),
        ("non-blank lines indexed", f"{result['lines']:,}"),
        ("source text", f"{result['text_mib']:.1f} MiB"),
        ("indexing wall time (background thread, walk included)", f"{result['index_wall_s']:.1f} s"),
        ("indexing CPU time", f"{result['index_cpu_s']:.1f} s"),
        ("peak RSS of the indexing process / over the bare interpreter",
         f"{result['peak_rss_mib']:.0f} / {result['rss_over_interpreter_mib']:.0f} MiB"),
        ("bytes the index holds (tracemalloc)", f"{result['index_tracemalloc_mib']:.0f} MiB"),
        (f"lookup p50 / p95 / max ({result['lookups']} holes, finished index)",
         f"{result['lookup_p50_ms']:.2f} / {result['lookup_p95_ms']:.2f} / {result['lookup_max_ms']:.1f} ms"),
        ("lookup CPU time p50 / p95 (the lookup's thread)",
         f"{result['lookup_cpu_p50_ms']:.2f} / {result['lookup_cpu_p95_ms']:.2f} ms"),
        (f"lookup p50 / p95 while a second indexer builds a fresh index ({result['lookups_during_indexing']} "
         "lookups of 20 holes, 10 ms apart)",
         f"{result['during_p50_ms']:.2f} / {result['during_p95_ms']:.2f} ms" if result["during_p50_ms"] else "-"),
        ("the same, CPU time of the lookup's thread",
         f"{result['during_cpu_p50_ms']:.2f} / {result['during_cpu_p95_ms']:.2f} ms" if during_ok else "-"),
    ]
    table = "| measure | value |\n|---|---|\n" + "\n".join(f"| {a} | {b} |" for a, b in rows)
    header = (f"# Workspace index: {files} files\n\n`python bench/workspace_index.py speed --files {files} "
              f"--holes {holes}`; {result['cpus']} CPUs shared with other jobs, load average (1, 5, 15 min) "
              f"{_loads(result['load_avg_before'])} before, {_loads(result['load_avg_after'])} after\n\n")
    out.mkdir(parents=True, exist_ok=True)
    (out / "speed.md").write_text(header + table + "\n")
    (out / "speed.json").write_text(json.dumps(result, indent=1) + "\n")
    print(table)
    return result


# -- dev precision --------------------------------------------------------------------------------------------

def dev(out: Path) -> dict[str, Any]:
    suite = load_suite("cuda-infill", "dev")
    holes = suite.select(["line", "midline"])
    results: dict[str, Any] = {}
    lines = ["# Workspace source alone, dev split, line + mid-line holes",
             "",
             "`python bench/workspace_index.py dev`: the top candidate of `workspace_for(file, 'dev', twins=...)`"
             " for each hole; exact = whitespace-insensitive equality with the truth.", ""]
    for twins in (True, False):
        by_bucket: Counter[str] = Counter()
        exact: Counter[str] = Counter()
        by_files: Counter[tuple[str, str]] = Counter()
        exact_files: Counter[tuple[str, str]] = Counter()
        kinds: Counter[str] = Counter()
        exact_kinds: Counter[str] = Counter()
        for hole in holes:
            text = suite.text(hole)
            document = _document_for(text, hole)
            source = workspace_for(hole.file, "dev", twins=twins)
            found = source.index.candidates(document[:hole.start], document[hole.start:], 3, source.exclude)
            bucket = _bucket(found)
            hit = bool(found) and _normal(found[0].text) == _normal(hole.truth(text))
            by_bucket[bucket] += 1
            exact[bucket] += hit
            kinds[hole.kind] += 1
            exact_kinds[hole.kind] += hit
            if found:
                for column in ("files 2+" if found[0].files > 1 else "files 1",
                               "rivals" if found[0].rivals else "alone"):
                    by_files[(bucket, column)] += 1
                    exact_files[(bucket, column)] += hit
        label = "with twins" if twins else "without twins (twins=False)"
        total = sum(exact.values())
        lines += [f"## {label}", "",
                  f"top-1 exact: {total}/{len(holes)} = {100 * total / len(holes):.1f}% "
                  f"(line {exact_kinds['line']}/{kinds['line']}, mid-line {exact_kinds['midline']}/{kinds['midline']})",
                  "", "| top score | holes | exact | exact % | files=1: n, exact % | files 2+: n, exact % "
                  "| no rival: n, exact % | rivals: n, exact % |",
                  "|---|---|---|---|---|---|---|---|"]
        for bucket in BUCKETS:
            n = by_bucket[bucket]
            cells = []
            for column in COLUMNS:
                m = by_files[(bucket, column)]
                cells.append(f"{m}, {100 * exact_files[(bucket, column)] / m:.0f}%" if m else "0")
            lines.append(f"| {bucket} | {n} | {exact[bucket]} | {100 * exact[bucket] / n:.0f}% | "
                         + " | ".join(cells) + " |" if n else f"| {bucket} | 0 | 0 | - | - | - | - | - |")
        lines.append("")
        results["twins" if twins else "no_twins"] = {
            "holes": len(holes), "exact": total, "by_bucket": dict(by_bucket), "exact_by_bucket": dict(exact),
            "by_kind": dict(kinds), "exact_by_kind": dict(exact_kinds),
            "by_bucket_files": {f"{b}|{m}": v for (b, m), v in by_files.items()},
            "exact_by_bucket_files": {f"{b}|{m}": v for (b, m), v in exact_files.items()}}
    out.mkdir(parents=True, exist_ok=True)
    (out / "dev.md").write_text("\n".join(lines))
    (out / "dev.json").write_text(json.dumps(results, indent=1) + "\n")
    print("\n".join(lines))
    return results


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "_measure":
        print(json.dumps(measure(Path(sys.argv[2]), Path(sys.argv[3]))))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=("speed", "dev", "all"))
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--holes", type=int, default=600)
    parser.add_argument("--out", type=Path,
                        default=ROOT / "docs" / "bench-logs" / "workspace" / datetime.date.today().isoformat())
    args = parser.parse_args()
    if args.what in ("speed", "all"):
        speed(args.out, args.files, args.holes)
    if args.what in ("dev", "all"):
        dev(args.out)


if __name__ == "__main__":
    main()
