"""Measure the idiom bank on CUDA-Infill dev (line + midline holes) and, when present, on bench/idioms/*.cu.

    .venv/bin/python docs/bench-logs/idioms-bank/2026-12-07/measure.py [--bank PATH] [--json OUT]

A hole's document is the file without its truth (dice_lsp.evals.systems.document_for), cursor at hole.start;
exact = whitespace-insensitive equality of a candidate's text and the truth. Never reads the test split.
bench/idioms/*.cu (canonical idioms, holes as bench/canonical_idioms.py makes them): reported only, never tuned
on.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from dice_lsp.completion.sources.idioms import DEFAULT_PATH, IdiomBank, _load
from dice_lsp.evals.suite import load_suite
from dice_lsp.evals.systems import document_for

ROOT = Path(__file__).resolve().parents[4]
BUCKETS = (0.0, 0.05, 0.1, 0.2, 0.4, 0.6, 1.01)


def same(a: str, b: str) -> bool:
    return "".join(a.split()) == "".join(b.split())


def dev_holes() -> Iterator[tuple[str, str, str, str]]:
    """(kind, before, after, truth) of the dev split's line and midline holes."""
    suite = load_suite("cuda-infill", "dev")
    for hole in suite.select(["line", "midline"]):
        text = suite.text(hole)
        document = document_for(text, hole)
        yield hole.kind, document[:hole.start], document[hole.start:], hole.truth(text)


def idiom_holes() -> Iterator[tuple[str, str, str, str]]:
    """(kind, before, after, truth) of the canonical idioms (bench/canonical_idioms.load_idioms, no nvcc)."""
    sys.path.insert(0, str(ROOT / "bench"))
    from canonical_idioms import load_idioms

    suite = load_idioms(compile_check=False)
    for hole in suite.holes:
        text = suite.text(hole)
        document = document_for(text, hole)
        yield hole.kind, document[:hole.start], document[hole.start:], hole.truth(text)


def measure(bank: IdiomBank, holes: list[tuple[str, str, str, str]]) -> dict[str, Any]:
    rows: dict[str, Any] = {}
    times: list[float] = []
    hits: list[dict[str, Any]] = []
    buckets = [[0, 0] for _ in BUCKETS[:-1]]
    for kind in [*sorted({h[0] for h in holes}), "all"]:
        chosen = [h for h in holes if kind in ("all", h[0])]
        covered = top1 = any3 = 0
        for kind_of, before, after, truth in chosen:
            start = time.perf_counter()
            found = bank.lookup(before, after, 3)
            times.append(time.perf_counter() - start)
            if not found:
                continue
            covered += 1
            hit = same(found[0].text, truth)
            top1 += hit
            any3 += any(same(c.text, truth) for c in found)
            if kind == "all":
                hits.append({"kind": kind_of, "truth": truth, "top1": found[0].text, "score": found[0].score,
                             "exact": hit})
                b = next(i for i in range(len(BUCKETS) - 1) if found[0].score < BUCKETS[i + 1])
                buckets[b][0] += 1
                buckets[b][1] += hit
        rows[kind] = {"holes": len(chosen), "covered": covered, "top1_exact": top1, "any3_exact": any3}
    last = len(BUCKETS) - 2
    rows["by_score"] = [{"score": f"[{BUCKETS[i]:.2f}, {min(BUCKETS[i + 1], 1.0):.2f}" + ("]" if i == last else ")"),
                         "covered": n, "top1_exact": e} for i, (n, e) in enumerate(buckets)]
    rows["shown"] = hits
    times.sort()
    rows["lookup_ms"] = {"p50": round(statistics.median(times) * 1e3, 3),
                         "p99": round(times[int(0.99 * (len(times) - 1))] * 1e3, 3)}
    return rows


def pct(a: int, b: int) -> str:
    return f"{100 * a / b:.1f}%" if b else "-"


def table(name: str, rows: dict[str, Any]) -> str:
    out = [f"### {name}", "", "| holes | n | with an idiom | top-1 exact (of all) | top-1 exact (of covered) "
           "| any of 3 exact (of covered) |", "|---|---:|---:|---:|---:|---:|"]
    for kind, r in rows.items():
        if kind in ("by_score", "lookup_ms", "shown"):
            continue
        out.append(f"| {kind} | {r['holes']} | {r['covered']} ({pct(r['covered'], r['holes'])}) | "
                   f"{pct(r['top1_exact'], r['holes'])} | {pct(r['top1_exact'], r['covered'])} | "
                   f"{pct(r['any3_exact'], r['covered'])} |")
    out += ["", "| top-1 score | covered | top-1 exact |", "|---|---:|---:|"]
    for b in rows["by_score"]:
        out.append(f"| {b['score']} | {b['covered']} | {b['top1_exact']} ({pct(b['top1_exact'], b['covered'])}) |")
    out += ["", f"lookup per hole: p50 {rows['lookup_ms']['p50']} ms, p99 {rows['lookup_ms']['p99']} ms", ""]
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bank", type=Path, default=DEFAULT_PATH)
    parser.add_argument("--json", type=Path)
    ns = parser.parse_args()
    start = time.perf_counter()
    bank = IdiomBank.load(ns.bank)
    load_ms = (time.perf_counter() - start) * 1e3
    _load.cache_clear()
    result: dict[str, Any] = {"bank": str(ns.bank), "idioms": len(bank), "keys": len(bank.entries),
                              "load_ms": round(load_ms, 1), "dev": measure(bank, list(dev_holes()))}
    folder = ROOT / "bench" / "idioms"
    if folder.is_dir():
        result["canonical"] = measure(bank, list(idiom_holes()))
    print(f"bank {ns.bank}: {result['idioms']} idioms, {result['keys']} keys, loaded in {result['load_ms']} ms\n")
    print(table("CUDA-Infill dev, line + midline", result["dev"]))
    if "canonical" in result:
        print(table("canonical idioms (bench/idioms, report only)", result["canonical"]))
    if ns.json:
        ns.json.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
