"""Background compiles of open .cu files: one task per document, a newer request replaces an older one.

The compile itself (`dice_lsp.toolchain.report.check_source`, cached) runs on one of COMPILE_WORKERS threads
of its own, so compiles never hold the threads that repair, optimize and bench run on; a compile replaced
or forgotten is cancelled and its nvcc killed at once, and every compile ends at its timeout, so a hung
nvcc holds a thread for that long at most, and only while it is the document's latest. This module
turns its report into LSP diagnostics (source `nvcc`) and code lenses above kernels, and remembers the
last report per document for the code-lens request. In an untrusted workspace the compilation database is
not read (its flags would be the workspace's choice of nvcc command line): the settings' flags apply, and
the database found is handed to `ignored` so the user can be told.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from lsprotocol import types

from dice_lsp.errors import DiceError
from dice_lsp.lifetime import Stopped
from dice_lsp.toolchain.cache import CompileCache, include_dependencies
from dice_lsp.toolchain.flags import CompileFlags, FlagError, find_database, flags_for
from dice_lsp.toolchain.report import CheckReport, Diagnostic, KernelResources, check_source, instance_name
from dice_lsp.wording import counted

LOG = logging.getLogger("dice_lsp.checks")
IDLE_SECONDS = 0.8  # typing pause before a didChange triggers a compile
CHECKED_SUFFIXES = (".cu",)
COMPILE_WORKERS = 2  # background compiles at once (each one nvcc)


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
            f"spills {_spills(kernel)}")


def _spills(kernel: KernelResources) -> int:
    return kernel.spill_stores + kernel.spill_loads


def _span(values: list[int], show: Callable[[int], str] = str) -> str:
    low, high = show(min(values)), show(max(values))
    return low if low == high else f"{low}–{high}"


def _heaviest(kernels: list[KernelResources]) -> str:
    """The instance to look at first among several: the one that spills most, else the one with the most
    registers, else the most shared memory; "" when they all use the same."""
    measures: list[tuple[str, Callable[[KernelResources], int]]] = [
        ("spills", _spills), ("regs", lambda k: k.registers), ("smem", lambda k: k.shared_bytes)]
    for label, measure in measures:
        values = [measure(k) for k in kernels]
        if max(values) > (0 if label == "spills" else min(values)):
            return f" · most {label}: {instance_name(max(kernels, key=measure).name)}"
    return ""


MAX_TOOLTIP_INSTANCES = 30  # instances listed one per line in a lens's tooltip


def kernel_lens(line: int, kernels: list[KernelResources]) -> types.CodeLens:
    """One lens for the kernel(s) compiled from one definition line. A template compiled for several
    arguments gives one instance each: the title summarises them (how many, the range of each resource,
    the instance to look at first) and the tooltip names each with its own numbers."""
    kernels = sorted(kernels, key=lambda k: k.name)
    names = [instance_name(k.name) for k in kernels]
    if len(kernels) == 1:
        title = lens_title(kernels[0]) if "<" not in names[0] else f"{names[0]} · {lens_title(kernels[0])}"
    else:
        title = (f"{len(kernels)} instances · regs {_span([k.registers for k in kernels])} · smem "
                 f"{_span([k.shared_bytes for k in kernels], lambda b: f'{b / 1024:.1f}')} KB · spills "
                 f"{_span([_spills(k) for k in kernels])}{_heaviest(kernels)}")
    listed = [f"{name}: {lens_title(k)}" for name, k in zip(names, kernels, strict=True)]
    if len(listed) > MAX_TOOLTIP_INSTANCES:
        listed = [*listed[:MAX_TOOLTIP_INSTANCES], f"and {len(listed) - MAX_TOOLTIP_INSTANCES} more"]
    tooltip = "\n".join(listed) if len(listed) > 1 else None
    return types.CodeLens(range=types.Range(types.Position(line, 0), types.Position(line, 0)),
                          command=types.Command(title=title, command="", tooltip=tooltip))


@dataclass(frozen=True)
class CheckRequest:
    """What one background compile needs: the document and where its flags come from."""
    uri: str
    path: Path
    text: str
    fallback: CompileFlags  # the dice.* flags, used when no compile_commands.json covers the file
    root: Path | None  # the workspace folder: the compilation database is looked for up to here
    nvcc: Path
    trusted: bool = False  # untrusted: the compilation database is ignored, `fallback` applies


class CompileChecks:
    def __init__(self, publish: Callable[[str, list[types.Diagnostic]], None],
                 ignored: Callable[[Path], None] = lambda _database: None) -> None:
        self.publish = publish
        self.ignored = ignored  # told (on the loop) of a compilation database an untrusted compile did not use
        self.cache = CompileCache()
        self.reports: dict[str, CheckReport] = {}
        self.requests: dict[str, CheckRequest] = {}
        self.dependencies: dict[str, set[Path]] = {}  # per document: local headers, and its flags' database
        self.tasks: dict[str, asyncio.Task[None]] = {}
        self.workers = ThreadPoolExecutor(COMPILE_WORKERS, thread_name_prefix="dice-compile")

    def wants(self, path: str) -> bool:
        return path.endswith(CHECKED_SUFFIXES)

    def schedule(self, request: CheckRequest, delay: float = 0.0) -> None:
        """Compile after `delay` seconds, cancelling a compile of the same document not started or not finished."""
        old = self.tasks.pop(request.uri, None)
        if old is not None:
            old.cancel()
        self.requests[request.uri] = request
        self.tasks[request.uri] = asyncio.create_task(self._run(request, delay))

    def affected_by(self, changed: Path) -> list[CheckRequest]:
        """The last requests of the open documents whose compile depends on the file `changed`."""
        return [self.requests[uri] for uri, paths in self.dependencies.items()
                if changed in paths and uri in self.requests]

    def forget(self, uri: str) -> None:
        """The document was closed: stop compiling and watching on its behalf."""
        task = self.tasks.pop(uri, None)
        if task is not None:
            task.cancel()
        for table in (self.reports, self.requests, self.dependencies):
            table.pop(uri, None)

    async def _run(self, request: CheckRequest, delay: float) -> None:
        await asyncio.sleep(delay)
        cancel = threading.Event()
        try:
            report, dependencies, unused = await asyncio.get_running_loop().run_in_executor(
                self.workers, self._check, request, cancel)
        except asyncio.CancelledError:
            cancel.set()  # a newer request or a close: its nvcc is killed now, not at its timeout
            raise
        except Stopped:
            return
        except (DiceError, OSError) as exc:
            LOG.warning("%s: compile failed: %s", request.path.name, exc)
            return
        if unused is not None:
            self.ignored(unused)
        self.reports[request.uri] = report
        self.dependencies[request.uri] = dependencies
        self.publish(request.uri, [lsp_diagnostic(d) for d in report.diagnostics])
        LOG.info("%s: %s, %s, %.0f ms%s", request.path.name, counted(len(report.diagnostics), "diagnostic"),
                 counted(len(report.kernels), "kernel"), report.elapsed_ms, " (cached)" if report.cached else "")

    def _check(self, request: CheckRequest, cancel: threading.Event) -> tuple[CheckReport, set[Path], Path | None]:
        """The report, the files it depends on, and the compilation database left unused (untrusted)."""
        database = find_database(request.path, request.root)
        if not request.trusted:
            flags, watched, unused = request.fallback, set(), database
        else:
            watched, unused = ({database.resolve()} if database else set()), None
            try:
                flags = flags_for(request.path, request.fallback, request.root)
            except FlagError as exc:  # a flag nvcc's shell would run: said on the first line, nothing compiled
                return CheckReport([Diagnostic(0, 0, 0, 0, "error", str(exc), "flags")], [], 0.0), watched, None
        folder = request.path.parent
        if cancel.is_set():
            raise Stopped("cancelled")
        report = check_source(request.text, folder, flags, self.cache, request.nvcc, cancel)
        return report, include_dependencies(request.text, (folder, *flags.include_dirs)) | watched, unused

    def lenses(self, uri: str) -> list[types.CodeLens]:
        report = self.reports.get(uri)
        if report is None:
            return []
        by_line: dict[int, list[KernelResources]] = {}
        for kernel in report.kernels:
            if kernel.line is not None:
                by_line.setdefault(kernel.line, []).append(kernel)
        return [kernel_lens(line, kernels) for line, kernels in sorted(by_line.items())]
