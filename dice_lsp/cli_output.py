"""How the command line shows each job's typed result: human text, or its JSON with `--json`, and the exit
code that goes with it. The answer goes to stdout (a fill, a table, a diff), notes about it to stderr, and a
status line on stderr while a job runs (silent when stderr is not a terminal), so stdout stays clean for
`--json` consumers. Where a job ran does not show here: a team server's results are the same types.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dice_lsp.wording import counted

if TYPE_CHECKING:
    from dice_lsp.completion.checks import Checks
    from dice_lsp.harness.bench import BenchReport
    from dice_lsp.jobs.api import Completed
    from dice_lsp.optimize import OptimizeReport, RepairResult
    from dice_lsp.remote.team import ServerStatus
    from dice_lsp.textdoc import Position
    from dice_lsp.toolchain.report import CheckReport

EXIT_NO_GPU = 3
# where a shown text came from, as the CLI says it
ORIGINS = {"document": "from this file", "workspace": "from the workspace", "idiom": "a CUDA idiom",
           "analogue": "the next line of a run", "rule": "what the kernel's structure implies"}


def status_bar(description: str) -> Any:
    """A one-line status on stderr that long jobs rewrite as they go (silent when stderr is not a terminal)."""
    from tqdm import tqdm

    return tqdm(desc=description, bar_format="{desc} [{elapsed}]", file=sys.stderr, disable=None, leave=False)


def note(line: str) -> None:
    print(f"dice-lsp: {line}", file=sys.stderr)


def completion(completed: Completed, where: Position, as_json: bool) -> int:
    """The fills, each with the checks it passed, then the model and where it ran; or why nothing is shown."""
    found = completed.completion
    no_region = (f"no region to fill at line {where.line}, character {where.character} (an empty or unfinished line "
                 "in a function, a selection, a /*@fill*/ marker, or after an open '{')")
    if as_json:  # an answer without items always says why
        print(json.dumps({**completed.json, "withheld": no_region} if found.hole is None else completed.json))
        return 0
    if found.hole is None:
        note(no_region)
        return 0
    texts = found.texts
    if not texts:
        note(f"no completion shown: {found.withheld}")
    passed: list[Checks | None] = [*found.checks] if found.checks is not None else [None] * len(texts)
    sources = found.sources or ["model"] * len(texts)
    chances = found.confidences or [None] * len(texts)
    for index, (fill, checks, source, chance) in enumerate(zip(texts, passed, sources, chances, strict=True)):
        if len(texts) > 1:
            print(f"--- candidate {index + 1} ---")
        print(fill)
        if checks is not None:
            origin = f" · {ORIGINS[source]}" if source in ORIGINS else ""
            sure = f" · P(right) {chance:.2f}" if chance is not None else ""
            print(f"[checks: {checks_line(checks)}{origin}{sure}]", file=sys.stderr)
    latency = round(found.latency_ms, 1)  # as the JSON has it
    print(f"[{completed.model} on {completed.device}, {latency:.0f} ms, {completed.where}]", file=sys.stderr)
    return 0


def checks_line(checks: Checks) -> str:
    """`parses ✓ · names ✓ · types not checked · compiles ✓`: what the shown text passed."""
    marks = {True: "✓", False: "✗", None: "not checked"}
    return " · ".join(f"{name} {marks[value]}" for name, value in checks.to_json().items())


def check(report: CheckReport, file: str, as_json: bool) -> int:
    """nvcc's diagnostics as `FILE:LINE:COL: severity: message`, then each kernel's resources; exit 1 on an
    error."""
    if as_json:
        print(json.dumps(report.to_json()))
        return 1 if report.errors else 0
    for d in report.diagnostics:
        code = f" [{d.code}]" if d.code else ""
        print(f"{file}:{d.line + 1}:{d.character + 1}: {d.severity}: {d.message}{code}")
    if report.kernels:
        print(f"{'kernel':40} {'line':>5} {'regs':>5} {'smem B':>8} {'stack B':>8} {'spill st/ld':>12}")
        for k in report.kernels:
            line = "" if k.line is None else str(k.line + 1)
            print(f"{k.name[:40]:40} {line:>5} {k.registers:>5} {k.shared_bytes:>8} {k.stack_bytes:>8} "
                  f"{f'{k.spill_stores}/{k.spill_loads}':>12}")
    print(f"[{counted(report.errors, 'error')}, {counted(len(report.diagnostics) - report.errors, 'warning')}, "
          f"{report.elapsed_ms:.0f} ms{', cached' if report.cached else ''}]", file=sys.stderr)
    return 1 if report.errors else 0


def bench(report: BenchReport, file: str, as_json: bool) -> int:
    """Each kernel's time, spread, reference and verdict; exit 3 without a GPU, 1 unless every kernel was
    verified."""
    if as_json:
        print(json.dumps(report.to_json()))
    else:
        for d in report.diagnostics:
            print(f"{file}:{d.line + 1}:{d.character + 1}: {d.severity}: {d.message}")
        if report.kernels:
            print(f"{'kernel':24} {'median ms':>10} {'spread':>7} {'ref ms':>9} {'speedup':>8}  result")
        for k in report.kernels:
            timed = k.median_ms is not None
            print(f"{k.name[:24]:24} {f'{k.median_ms:.4f}' if timed else '-':>10} "
                  f"{f'±{k.spread_pct:.1f}%' if k.spread_pct is not None else '-':>7} "
                  f"{f'{k.reference_ms:.4f}' if k.reference_ms is not None else '-':>9} "
                  f"{f'{k.speedup_vs_ref:.2f}x' if k.speedup_vs_ref is not None else '-':>8}  "
                  f"{'verified' if k.verified else k.failure or 'not verified'}")
            for flag in k.flags:
                print(f"{'':24} flagged: {flag}")
            if k.shapes:
                print(f"{'':24} shapes: {' | '.join(k.shapes)}{' (one shape only)' if len(k.shapes) == 1 else ''}")
            for limitation in k.limitations:  # a shape outside the problem it refuses: verified on the problem's
                print(f"{'':24} limited: {limitation}")
            if k.memcheck:
                print(f"{'':24} memcheck: {k.memcheck}")
        if report.reason:
            note(report.reason)
    if not report.gpu:
        return EXIT_NO_GPU
    return 0 if report.compile_ok and report.kernels and all(k.verified for k in report.kernels) else 1


def optimize(report: OptimizeReport, as_json: bool, out: Path | None) -> int:
    """The ranked rewrites, the summary and the best one's diff (or, where none could be verified, the draft's,
    to read); exit 1 unless a rewrite is offered. `out`: where the best one was written, if it was."""
    best, draft = report.best, report.draft
    if as_json:
        print(json.dumps(report.to_json()))
        return 0 if best is not None else 1
    print(f"{'rank':>4} {'origin':14} {'compiled':>8} {'repairs':>7} {'verified':>8} {'speedup':>8} "
          f"{'median ms':>10} {'regs':>5} {'spills':>6}  note")
    for r in report.rewrites:
        res = r.resources
        print(f"{r.rank:>4} {r.origin[:14]:14} {'yes' if r.compiled else 'no':>8} {r.repair_rounds:>7} "
              f"{('yes' if r.verified else 'no') if report.gpu else '-':>8} "
              f"{f'{r.speedup:.2f}x' if r.speedup is not None else '-':>8} "
              f"{f'{r.median_ms:.4f}' if r.median_ms is not None else '-':>10} "
              f"{res.registers if res else '-':>5} "
              f"{res.spill_stores + res.spill_loads if res else '-':>6}  "
              f"{(r.failure or r.less_work or '')[:60]}")
    print(report.summary())
    if best is not None and out is None:
        print(best.diff, end="")
    elif draft is not None:  # to read, not to apply: it could not be verified
        print(f"draft (unverified, not applied):\n{draft.diff}", end="")
    if out is not None:
        note(f"wrote {out}" if best is not None else f"nothing written to {out}")
    return 0 if best is not None else 1


def repair(result: RepairResult, file: str, diff: str, as_json: bool) -> int:
    """The diff of the repair, then what it changed and why and the errors left; exit 1 unless it compiles."""
    if as_json:
        print(json.dumps({**result.to_json(), "diff": diff}))
        return 0 if result.compiles else 1
    print(diff, end="")
    state = "compiles" if result.compiles else f"still {counted(len(result.errors), 'error')}"
    note(f"{state} after {counted(result.rounds, 'round')}")
    for change in result.changes:
        note(f"changed {change.describe()}")
    if result.stopped:
        note(result.stopped)
    for d in result.errors:
        print(f"{file}:{d.line + 1}:{d.character + 1}: error: {d.message}", file=sys.stderr)
    return 0 if result.compiles else 1


def status(found: ServerStatus, server: str, as_json: bool) -> int:
    """A team server's health in one line; exit 0 when its model is ready (a probe for systemd or a load
    balancer)."""
    if as_json:
        print(json.dumps(found.json))
    else:
        detail = (f"{found.model} on {found.device} ({found.dtype})" if found.state == "ready"
                  else found.message or found.model)
        print(f"{server}: {found.state}: {detail}; {found.in_flight} in flight, "
              f"{found.queued} queued, {found.served} served, {found.rows_per_call:.2f} rows per model call, "
              f"up {found.uptime_s:.0f} s, dice-lsp {found.version}")
    return 0 if found.state == "ready" else 1


__all__ = ["EXIT_NO_GPU", "ORIGINS", "bench", "check", "checks_line", "completion", "note", "optimize", "repair",
           "status", "status_bar"]
