"""Benchmark results above kernels: `0.412 ms ±1% · 1.82× vs ref · verified`, or why not."""

from __future__ import annotations

from lsprotocol import types

from dice_lsp.cuda.functions import parse_functions
from dice_lsp.harness.bench import BenchReport, KernelResult


def bench_title(kernel: KernelResult) -> str:
    parts = []
    if kernel.median_ms is not None:
        parts.append(f"{kernel.median_ms:.3f} ms ±{kernel.spread_pct or 0:.0f}%")
    if kernel.speedup_vs_ref is not None:
        parts.append(f"{kernel.speedup_vs_ref:.2f}× vs ref")
    if kernel.verified:
        parts.append("verified at one shape only" if len(kernel.shapes) == 1 else "verified")
        if kernel.limitations:  # shapes outside the problem it refuses with an error of its own
            parts.append(f"limited: {'; '.join(kernel.limitations)}"[:160])
    else:
        parts.append(f"not verified: {kernel.failure or '; '.join(kernel.flags) or 'unknown'}"[:160])
    return " · ".join(parts)


def bench_lenses(text: str, report: BenchReport) -> list[types.CodeLens]:
    """One lens per benchmarked kernel, on its definition in `text` (the first line when not found), and
    one for a report without kernels (no GPU, no compile)."""
    lines = {f.name.split("::")[-1]: text.count("\n", 0, f.start) for f in parse_functions(text) if f.is_kernel}
    found = [(lines.get(k.name, 0), bench_title(k)) for k in report.kernels]
    if not report.kernels and report.reason:
        found.append((0, f"benchmark: {report.reason}"))
    return [types.CodeLens(range=types.Range(types.Position(line, 0), types.Position(line, 0)),
                           command=types.Command(title=title, command="")) for line, title in found]
