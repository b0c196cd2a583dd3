"""Background compiles of open .cu files: one task per document, a newer request replaces an older one.

The compile itself (`dice_lsp.toolchain.report.check_source`, cached) runs on a worker thread; this module
turns its report into LSP diagnostics (source `nvcc`) and code lenses above kernels, and remembers the
last report per document for the code-lens request.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path

from lsprotocol import types

from dice_lsp.errors import DiceError
from dice_lsp.toolchain.cache import CompileCache
from dice_lsp.toolchain.report import CheckReport, Diagnostic, KernelResources, check_source

LOG = logging.getLogger("dice_lsp.checks")
IDLE_SECONDS = 0.8  # typing pause before a didChange triggers a compile
CHECKED_SUFFIXES = (".cu",)


def lsp_diagnostic(d: Diagnostic) -> types.Diagnostic:
    related = [types.DiagnosticRelatedInformation(
        location=types.Location(uri=Path(r.file).resolve().as_uri(), range=types.Range(
            types.Position(r.line, 0), types.Position(r.line + 1, 0))), message=r.message) for r in d.related]
    return types.Diagnostic(
        range=types.Range(types.Position(d.line, d.character), types.Position(d.end_line, d.end_character)),
        message=d.message, source="nvcc", code=d.code, related_information=related or None,
        severity=types.DiagnosticSeverity.Error if d.severity == "error" else types.DiagnosticSeverity.Warning)


def lens_title(kernel: KernelResources) -> str:
    """`regs 32 · smem 4.0 KB · spills 0` (spilled bytes, stores + loads)."""
    return (f"regs {kernel.registers} · smem {kernel.shared_bytes / 1024:.1f} KB · "
            f"spills {kernel.spill_stores + kernel.spill_loads}")


class CompileChecks:
    def __init__(self, publish: Callable[[str, list[types.Diagnostic]], None]) -> None:
        self.publish = publish
        self.cache = CompileCache()
        self.reports: dict[str, CheckReport] = {}
        self.tasks: dict[str, asyncio.Task[None]] = {}

    def wants(self, path: str) -> bool:
        return path.endswith(CHECKED_SUFFIXES)

    def schedule(self, uri: str, path: str, text: str, arch: str, nvcc: Path, delay: float = 0.0) -> None:
        """Compile `text` after `delay` seconds, cancelling a compile of `uri` not started or not finished."""
        old = self.tasks.pop(uri, None)
        if old is not None:
            old.cancel()
        self.tasks[uri] = asyncio.create_task(self._run(uri, Path(path), text, arch, nvcc, delay))

    async def _run(self, uri: str, path: Path, text: str, arch: str, nvcc: Path, delay: float) -> None:
        await asyncio.sleep(delay)
        try:
            report = await asyncio.to_thread(check_source, text, path.parent, arch, (), self.cache, nvcc)
        except (DiceError, OSError) as exc:
            LOG.warning("%s: compile failed: %s", path.name, exc)
            return
        self.reports[uri] = report
        self.publish(uri, [lsp_diagnostic(d) for d in report.diagnostics])
        LOG.info("%s: %d diagnostics, %d kernels, %.0f ms%s", path.name, len(report.diagnostics),
                 len(report.kernels), report.elapsed_ms, " (cached)" if report.cached else "")

    def lenses(self, uri: str) -> list[types.CodeLens]:
        report = self.reports.get(uri)
        if report is None:
            return []
        return [types.CodeLens(range=types.Range(types.Position(k.line, 0), types.Position(k.line, 0)),
                               command=types.Command(title=lens_title(k), command=""))
                for k in report.kernels if k.line is not None]
