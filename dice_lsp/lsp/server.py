"""The language server: LSP feature handlers and their wiring over small collaborators.

The collaborators: `jobs` (`dice_lsp.jobs.api.Jobs`: completion, optimize, repair and benchmarks, run on this
machine's model host or on the team server of `dice.server.url`, answering typed results), `reports`
(`$/progress`), `checks` (background compiles: diagnostics and resource lenses), `notices` (what an
untrusted workspace does not get, `dice_lsp.lsp.trust`; asked at each use, so new settings from the client
change it at once) and the code actions of `rewrite_actions`. Model work runs on the host's thread (or the
team server); handlers only await it, so the event loop stays free for other requests.

Errors, one policy:
- a `DiceError` the user must see or act on (a setting that cannot be used, no nvcc, no GPU, an optimize,
  repair or benchmark that failed) -> one window/showMessage (`tell`) and a line in the server's log; a team
  server's change of state goes to the `dice/status` notification (the status bar) instead;
- everything else (a completion that failed or shows nothing, a generation stopped early, a team server
  that went away) -> the log only (`log`: the server's log and the client's, never a pop-up);
- cancellation is never an answer of its own: `$/cancelRequest` cancels the handler's task (a command's
  too: `dice_lsp.lsp.protocol`), which cancels the job's ticket (or its team server call) and re-raises
  `asyncio.CancelledError`, so pygls answers RequestCancelled. A job the user stopped otherwise (cancelling
  its `$/progress`) or that a newer request for the same document replaced (`Cancelled`) ends as what the
  method answers when there is nothing: null for a completion, "optimize cancelled" for the command.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import sys
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path

from dice_lsp import __version__
from dice_lsp.complete import Compiler, CompileVerdicts, Completion, front_end_for, nvcc_compiler
from dice_lsp.completion.checks import Checks
from dice_lsp.completion.sources.workspace import WorkspaceIndex, WorkspaceIndexer
from dice_lsp.cuda.holes import find_markers
from dice_lsp.errors import Cancelled, DiceError
from dice_lsp.harness.bench import BenchReport, has_benchmark
from dice_lsp.jobs.api import BenchJob, CompleteJob, Document, Jobs, OptimizeJob, RepairJob
from dice_lsp.jobs.local import LocalJobs
from dice_lsp.jobs.model_host import ModelHost
from dice_lsp.jobs.status import ModelStatus
from dice_lsp.lsp.bench_lenses import bench_lenses
from dice_lsp.lsp.compile_checks import IDLE_SECONDS, CheckRequest, CompileChecks
from dice_lsp.lsp.file_watch import FileWatch
from dice_lsp.lsp.progress import Progress
from dice_lsp.lsp.protocol import DiceProtocol
from dice_lsp.lsp.rewrite_actions import (
    OPTIMIZE_COMMAND,
    REPAIR_COMMAND,
    compact_diff,
    edit_json,
    optimize_actions,
    repair_actions,
    whole_document_edit,
)
from dice_lsp.lsp.trust import (
    NOT_BENCHMARKED,
    Notices,
    bench_skipped,
    database_ignored,
    effective,
    remote_code_ignored,
)
from dice_lsp.remote.protocol import RemoteError
from dice_lsp.remote.team import TeamJobs, TeamServer
from dice_lsp.settings import Settings
from dice_lsp.textdoc import Position, clamped, position_at
from dice_lsp.toolchain.clang import ClangJudge
from dice_lsp.toolchain.flags import CompileFlags, FlagError, flags_for
from dice_lsp.toolchain.nvcc import find_nvcc
from dice_lsp.wording import counted

LOG = logging.getLogger("dice_lsp.server")
TOLD = "told_client"  # a log record's attribute: the client was already sent this line (`DiceServer.log`)


class ClientLog(logging.Handler):
    """The server's log lines below ERROR sent to the client as `window/logMessage` at their level (an editor shows
    a language server's stderr as errors: every info line was an `[error]` in VS Code's output). Records come from
    any thread; they reach the client through the event loop, and none once it has closed."""

    KINDS = ((logging.WARNING, types.MessageType.Warning), (logging.INFO, types.MessageType.Info))

    def __init__(self, server: DiceServer, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(logging.INFO)
        self.server, self.loop = server, loop
        self.setFormatter(logging.Formatter("%(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.ERROR or getattr(record, TOLD, False) or self.loop.is_closed():
            return
        kind = next(kind for level, kind in self.KINDS if record.levelno >= level)
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            self.loop.call_soon_threadsafe(self.server.window_log_message,
                                           types.LogMessageParams(kind, self.format(record)))


def send_log_to_client(server: DiceServer, loop: asyncio.AbstractEventLoop) -> ClientLog:
    """From now on the log's info and warning lines go to the client (`ClientLog`), and stderr keeps the errors:
    where a client reads the server's stderr too, a line must not show twice, once as an error."""
    handler = ClientLog(server, loop)
    logging.getLogger("dice_lsp").addHandler(handler)
    for stream in logging.getLogger().handlers:
        if isinstance(stream, logging.StreamHandler) and stream.stream is sys.stderr and stream.level < logging.ERROR:
            stream.setLevel(logging.ERROR)
    return handler
STATUS_NOTIFICATION = "dice/status"
# after each completion at a hole: {"uri", "line" (0-based), "shown", "confidence" (P(right) or null), "reason" (why
# nothing was shown, or null)}; VS Code's status item says it in its tooltip (the editor shows nothing otherwise)
COMPLETION_NOTIFICATION = "dice/completion"
FILL_COMMAND = "dice.fillHole"
APPLY = "Apply"
WATCH_SETTLE_SECONDS = 0.3  # a checkout writes many files: wait for the burst to end before compiling
CONFIGURATION_SECONDS = 30.0  # longest wait for the client's answer to workspace/configuration
INDEXER_STOP_SECONDS = 2.0  # longest wait at exit for a workspace indexer (it stops between two files)
MODEL_STOP_SECONDS = 60.0  # longest wait at exit for the model thread (one native call: a shard being read)
T = TypeVar("T")


class DiceServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("dice-lsp", __version__, protocol_cls=DiceProtocol)
        self.settings = Settings()
        self.init_options: Any = None
        self.init_errors: list[str] = []  # why values of initializationOptions were refused (told once)
        self.client_log: ClientLog | None = None  # the log's lines to the client, once it is initialized
        self._load_submitted: asyncio.Event | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.host = ModelHost(self._status_from_any_thread)
        self.notices = Notices(self.tell)  # why an untrusted workspace's files or code were not used, once each
        self.checks = CompileChecks(lambda uri, found: self.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=uri, diagnostics=found)),
            lambda database: self.notices.once("database", database_ignored(database)))
        self.nvcc: Path | None = None
        self.nvcc_for: str | None = "unresolved"  # the dice.nvcc setting `self.nvcc` was found for
        self.watch: FileWatch | None = None
        self.unconfigured: set[str] = set()  # documents opened before the settings were read
        self.bench_reports: dict[str, BenchReport] = {}
        self.reports = Progress(self)  # `$/progress`
        self.local = LocalJobs(self.host, on_cancelled=self._told_cancelled)
        self.jobs: Jobs = self.local  # a team server's when dice.server.url is set (`load_model`)
        self.verdict_worker = ThreadPoolExecutor(1, thread_name_prefix="dice-verdicts")  # one nvcc at a time
        self.verdicts = CompileVerdicts(self.verdict_worker.submit)
        # the workspace's CUDA/C++ lines, for completions (`sources.workspace`): indexed in the background, only
        # in a trusted workspace
        self.index = WorkspaceIndex()
        self.indexers: list[WorkspaceIndexer] = []

    def shutdown(self) -> None:
        """The end of the session: stop pygls's workers, then the model thread, before the process exits
        (see `ModelHost.close` for why an exit must wait for it). A thread still busy past the bound is
        left by exiting at once, without the interpreter's finalization that would crash on it."""
        super().shutdown()  # type: ignore[no-untyped-call]
        for indexer in self.indexers:
            indexer.stop(INDEXER_STOP_SECONDS)
        if not self.host.close(MODEL_STOP_SECONDS):
            LOG.error("the model thread is still busy after %.0f s; exiting without waiting for it",
                      MODEL_STOP_SECONDS)
            logging.shutdown()
            os._exit(1)

    def document_opened(self, uri: str) -> None:
        """A document the editor opened (or saved, or opened before the settings were read, now that they are):
        compile it, and start clang's one-time work on it."""
        self.check_document(uri)
        self.warm_front_end(uri)

    def warm_front_end(self, uri: str) -> None:
        """clang's one-time work for a file (how it reads the toolkit, the file's precompiled preamble) starts
        in the background, so that the first completion there gets a verdict in ~50 ms instead of reading every
        header the file includes (`dice_lsp.toolchain.clang`). Not where completions run on a team server."""
        if not self.load_submitted().is_set() or not self.settings.type_check or not isinstance(self.jobs, LocalJobs):
            return
        document = self.workspace.get_text_document(uri)
        if not self.checks.wants(document.path) or self.loop is None:
            return
        path, text, settings = Path(document.path), document.source, self.settings

        def warm() -> None:
            judge = self.front_end_for(path, text, settings)
            if isinstance(judge, ClangJudge):
                judge.open()

        self.loop.run_in_executor(None, warm)

    async def warm_clang(self) -> None:
        """Find out how clang reads the toolkit (self-test runs, ~0.5 s once per process) before the model
        loads, rather than beside it or beside the first completion: the self-test's time sets the checks'
        bounds (`clang.FrontEnd`), and measured on a busy CPU it made them ~1.5x as long."""
        if not self.settings.type_check or not isinstance(self.jobs, LocalJobs):
            return
        settings, nvcc = self.settings, self.nvcc

        def warm() -> None:
            judge = front_end_for("", None, CompileFlags(), settings, nvcc)
            if isinstance(judge, ClangJudge):
                judge.front  # noqa: B018 - found once per process, on first use

        await asyncio.to_thread(warm)

    def check_document(self, uri: str, delay: float = 0.0) -> None:
        """Compile an open .cu document in the background (diagnostics and kernel resources)."""
        if not self.load_submitted().is_set():  # opened before the client's settings were read
            self.unconfigured.add(uri)
            return
        document = self.workspace.get_text_document(uri)
        if not self.settings.diagnostics or not self.checks.wants(document.path):
            return
        if self.nvcc_for != self.settings.nvcc:  # first compile, or the setting changed: look again, say once
            self.nvcc_for = self.settings.nvcc
            try:
                self.nvcc = find_nvcc(self.settings.nvcc)
            except DiceError as exc:
                self.nvcc = None
                self.tell(f"dice-lsp: {exc}; compile diagnostics are off")
        if self.nvcc is None:
            return
        path = Path(document.path)
        root = self.workspace_root(path)
        if root is None and self.watch is not None:
            self.watch.watch(path.parent, recursive=False)  # no workspace: at least the file's own folder
        self.checks.schedule(CheckRequest(uri, path, document.source, self.settings.compile_flags(root or path.parent),
                                          root, self.nvcc, self.settings.trusted), delay)

    def flags_of(self, path: Path, settings: Settings) -> CompileFlags:
        """How `path` compiles: its compile_commands.json entry (a trusted workspace's only), else the settings
        (relative include folders taken from its workspace folder)."""
        own = settings.compile_flags(self.workspace_root(path) or path.parent)
        return flags_for(path, own) if settings.trusted else own

    def workspace_root(self, path: Path) -> Path | None:
        """The workspace folder holding `path`, if any."""
        folders = [Path(to_fs_path(f.uri) or f.uri) for f in self.workspace.folders.values()]
        return next((f for f in folders if path.is_relative_to(f)), None)

    def index_workspace(self) -> None:
        """Start indexing each workspace folder not yet indexed (`WorkspaceIndexer`: nothing is read while the
        workspace is untrusted; a `$/progress`-free background walk, said in the log when done)."""
        for folder in self.workspace.folders.values():
            root = Path(to_fs_path(folder.uri) or folder.uri)
            if not root.is_dir() or any(indexer.root == root.resolve() for indexer in self.indexers):
                continue
            indexer = WorkspaceIndexer(root, self.index, trusted=self.settings.trusted,
                                       progress=functools.partial(self._indexed, root))
            self.indexers.append(indexer)
            indexer.start()

    def _indexed(self, root: Path, done: int, total: int) -> None:
        """The indexer's progress (from its thread): the end of a walk is said in the client's log."""
        if done == total and self.loop is not None and not self.loop.is_closed():
            message = f"dice-lsp: {done} files of {root.name} indexed for completions ({self.index.lines} lines)"
            self.loop.call_soon_threadsafe(self.log, message, types.MessageType.Log)

    def reindex(self, uri: str) -> None:
        """Index a saved or closed document again from disk (what other files' completions see of it)."""
        path = to_fs_path(uri)
        if path is None:
            return
        for indexer in self.indexers:
            indexer.changed(path)

    def file_changed_on_disk(self, changed: Path) -> None:
        """Recompile the open documents that include `changed` (or take their flags from it), and index it
        again."""
        for indexer in self.indexers:
            indexer.changed(changed)
        for request in self.checks.affected_by(changed):
            if request.path != changed:  # an open document's own buffer wins over its file
                self.check_document(request.uri, delay=WATCH_SETTLE_SECONDS)

    def _status_from_any_thread(self, status: ModelStatus) -> None:
        """Model-host status changes arrive on its thread; notifications must leave from the loop."""
        if self.loop is not None and not self.loop.is_closed():
            self.loop.call_soon_threadsafe(self.protocol.notify, STATUS_NOTIFICATION, status.to_json())

    def settings_from(self, raw: Any) -> tuple[Settings, list[str]]:
        """Settings = defaults, then initializationOptions, then the client's current `dice` section.

        Each configuration the client sends is its whole section, so a key it no longer sends returns to
        its default instead of keeping an old value.
        """
        base, _ = self.initial_settings()
        return base.updated(raw)

    def initial_settings(self) -> tuple[Settings, list[str]]:
        """The defaults with initializationOptions applied, and why any of their values was refused."""
        return Settings().updated(Settings.initialization_options(self.init_options))

    async def apply_settings(self, raw: Any) -> None:
        new, errors = self.settings_from(raw)
        for error in errors:
            self.tell(error)
        old, self.settings = self.settings, new
        if new.trusted != old.trusted:
            self.trust_changed()
        self.tell_untrusted()
        if effective(new).model_changed(effective(old)) or self.host.status.state == "idle":
            await self.load_model()

    async def client_configuration(self) -> tuple[Any, bool]:
        """The client's `dice` section (workspace/configuration) and True; (None, False), with one warning
        in the log, when the client answers with an error or something that is not a configuration, or not
        within `CONFIGURATION_SECONDS`: the settings then stay as they are and the session goes on."""
        try:
            values = await asyncio.wait_for(self.workspace_configuration_async(
                types.ConfigurationParams(items=[types.ConfigurationItem(section="dice")])), CONFIGURATION_SECONDS)
        except Exception as exc:  # TimeoutError, or the client's error
            reason = f"no answer within {CONFIGURATION_SECONDS:.0f} s" if isinstance(exc, TimeoutError) else exc
            LOG.warning("workspace/configuration failed (%s); keeping the settings as they are", reason)
            self.window_log_message(types.LogMessageParams(
                types.MessageType.Warning, f"dice-lsp: the editor's dice settings could not be read ({reason})"))
            return None, False
        return (values[0] if isinstance(values, (list, tuple)) and values else None), True

    def tell_untrusted(self) -> None:
        """Say (once) what the current settings ask for that an untrusted workspace does not get."""
        if not self.settings.trusted and self.settings.trust_remote_code and self.settings.server_url is None:
            self.notices.once("remote_code", remote_code_ignored())

    def trust_changed(self) -> None:
        """The user trusted the workspace (or no longer does): reasons are said afresh, the open documents
        compile again with the flags now allowed, and lenses that said "not run" go."""
        LOG.info("workspace %s", "trusted" if self.settings.trusted else "not trusted")
        for indexer in self.indexers:
            indexer.set_trusted(self.settings.trusted)
        self.notices.reset()
        kept = {uri: r for uri, r in self.bench_reports.items() if r.reason != NOT_BENCHMARKED}
        dropped, self.bench_reports = len(kept) < len(self.bench_reports), kept
        if self.load_submitted().is_set():
            for uri in list(self.workspace.text_documents):
                self.check_document(uri)
        if dropped:
            self.refresh_lenses()

    def refresh_lenses(self) -> None:
        workspace = self.client_capabilities.workspace
        if workspace is not None and workspace.code_lens is not None and workspace.code_lens.refresh_support:
            self.workspace_code_lens_refresh(None)

    async def load_model(self) -> None:
        """Make the jobs' backend ready for the settings: this machine's model loads in the background with
        `$/progress` when the client supports it; with `dice.server.url`, the team server is asked how it is."""
        await self.jobs.close()
        self.jobs = self.jobs_for(self.settings)
        await self.warm_clang()
        starting = self.jobs.start(effective(self.settings))
        self.load_submitted().set()
        for uri in self.unconfigured.intersection(self.workspace.text_documents):
            self.document_opened(uri)
        self.unconfigured.clear()
        token = await self.reports.begin("dice-lsp", starting.loading) if starting.loading is not None else None
        self.reports.end(token, await starting.ready)

    def jobs_for(self, settings: Settings) -> Jobs:
        """The team server of `dice.server.url` (a new link for these settings), else this machine."""
        return self.local if settings.server_url is None else TeamJobs(TeamServer(settings, self.team_status))

    def team_status(self, status: ModelStatus, failure: RemoteError | None) -> None:
        """The team server's state changed: the status notification says it, the log says why."""
        self.protocol.notify(STATUS_NOTIFICATION, status.to_json())
        if failure is not None:
            self.log(f"dice-lsp: {failure}")

    def tell(self, message: str, kind: types.MessageType = types.MessageType.Warning) -> None:
        """What the user must see or act on: one window/showMessage, and the log."""
        LOG.log(logging.INFO if kind in (types.MessageType.Info, types.MessageType.Log) else logging.WARNING,
                "%s", message)
        self.window_show_message(types.ShowMessageParams(kind, message))

    def log(self, message: str, kind: types.MessageType = types.MessageType.Warning) -> None:
        """Everything else: the server's log and the client's (its output panel, never a pop-up)."""
        LOG.log(logging.WARNING if kind in (types.MessageType.Warning, types.MessageType.Error) else logging.DEBUG,
                "%s", message, extra={TOLD: True})
        self.window_log_message(types.LogMessageParams(kind, message))

    def document_job(self, key: str, uri: str, said: Callable[[str], None] | None = None) -> Document:
        """The open document `uri` as it is now, with the current settings, for a job keyed `key`."""
        document = self.workspace.get_text_document(uri)
        path, settings = Path(document.path), self.settings
        return Document(path, document.source, settings, lambda: self.flags_of(path, settings), key=key, said=said)

    async def rewrite_job(self, uri: str, version: int | None, title: str,
                          run: Callable[[Document], Awaitable[T]]) -> tuple[T | None, str]:
        """Run a model rewrite of document `uri` (optimize, repair) with cancellable `$/progress`; `run` is
        called once the settings are read (so it looks `self.jobs` up then). Returns its result (None if
        refused, cancelled or failed) and what to tell the user. The user cancelling the
        progress (or a newer rewrite replacing it) is a result ("optimize cancelled"); the request itself
        being cancelled re-raises `asyncio.CancelledError`, so pygls answers RequestCancelled."""
        await self.load_submitted().wait()
        document = self.workspace.get_text_document(uri)
        if version is not None and document.version != version:
            return None, "the document changed since the action was offered; run it again"
        running: list[asyncio.Future[T]] = []

        def stop() -> None:  # the user cancelled the progress
            for started in running:
                started.cancel()

        token = await self.reports.begin(f"DICE {title}", Path(document.path).name, stop)
        task = asyncio.ensure_future(run(self.document_job(f"{title} {uri}", uri, self.reports.reporter(token))))
        running.append(task)
        try:
            result = await task
        except (Cancelled, asyncio.CancelledError):
            self.reports.end(token, "cancelled")
            this = asyncio.current_task()
            if this is not None and this.cancelling():
                raise
            self.log(f"dice-lsp: {title} {uri} cancelled", types.MessageType.Log)
            return None, f"{title} cancelled"
        except DiceError as exc:
            self.reports.end(token, str(exc))
            return None, str(exc)
        self.reports.end(token, "done")
        return result, ""

    async def optimize_kernel(self, uri: str, kernel: str, version: int | None, ask: bool) -> dict[str, Any]:
        """Optimize `kernel`, then offer the best rewrite: applied only if the user says so and the document
        is still the version it was made for. Without `ask`, the edit is returned for the client to preview."""
        started = self.workspace.get_text_document(uri)
        made_for = started.version
        report, problem = await self.rewrite_job(uri, version, "optimize",
                                                 lambda document: self.jobs.optimize(OptimizeJob(document, kernel)))
        if report is None:
            self.tell(f"dice-lsp: {problem}")
            return {"summary": problem, "report": None, "edit": None, "applied": False}
        summary, best = report.summary(), report.best
        edit = whole_document_edit(uri, made_for, started.source, best.text) if best is not None else None
        result = {"summary": summary, "report": report.to_json(), "edit": edit_json(edit), "applied": False}
        if not ask:
            return result
        if edit is None:
            self.tell(f"DICE: {summary}", types.MessageType.Info)
            return result
        return await self.apply_if_asked(result, f"DICE: {summary}", uri, made_for, edit, f"DICE: optimize {kernel}",
                                         "the document changed while the kernel was being optimized")

    async def apply_if_asked(self, result: dict[str, Any], question: str, uri: str, made_for: int | None,
                             edit: types.WorkspaceEdit, label: str, changed: str) -> dict[str, Any]:
        """Ask Apply / Discard with `question`; apply `edit` only on Apply and only to the version it was made
        for (else say `changed`). `result` is the command's answer, updated with what became of the edit."""
        choice = await self.window_show_message_request_async(types.ShowMessageRequestParams(
            type=types.MessageType.Info, message=question,
            actions=[types.MessageActionItem(APPLY), types.MessageActionItem("Discard")]))
        if choice is None or choice.title != APPLY:
            return result
        if self.workspace.get_text_document(uri).version != made_for:
            result["summary"] = stale = f"not applied: {changed}"
            self.tell(f"dice-lsp: {stale}")
            return result
        applied = await self.workspace_apply_edit_async(types.ApplyWorkspaceEditParams(edit=edit, label=label))
        result["applied"] = bool(applied.applied)
        return result

    async def repair_document(self, uri: str, version: int | None, ask: bool) -> dict[str, Any]:
        """Repair the document (re-writing only what nvcc rejects), then offer the edit: with `ask`, a question
        shows the changes and a diff of them, and the edit is applied only on Apply and only if the document is
        still the version it was made for. Without `ask`, the edit is returned for the client to preview and
        nothing is said (the client shows the summary). An edit is offered only when the file then compiles."""
        started = self.workspace.get_text_document(uri)
        made_for, before = started.version, started.source
        result, problem = await self.rewrite_job(uri, version, "repair",
                                                 lambda document: self.jobs.repair(RepairJob(document)))
        edit, kind = None, types.MessageType.Warning
        if result is None:
            summary = problem
        elif not result.compiles:
            summary = (f"could not make it compile: {counted(len(result.errors), 'error')} left after "
                       f"{counted(result.rounds, 'round')}")
        elif result.text == before:
            summary, kind = "nothing to repair: it compiles as it is", types.MessageType.Info
        elif self.workspace.get_text_document(uri).version != made_for:
            summary = "the document changed during the repair; run it again"
        else:
            summary = f"repaired: {result.summary()}"
            edit = whole_document_edit(uri, made_for, before, result.text)
        answer = {"summary": summary, "repair": None if result is None else result.to_json(),
                  "edit": edit_json(edit), "applied": False}
        if not ask:
            return answer
        if result is None or edit is None:
            self.tell(f"dice-lsp: {summary}", kind)
            return answer
        return await self.apply_if_asked(answer, f"DICE: {summary}\n{compact_diff(before, result.text)}", uri,
                                         made_for, edit, "DICE: repair",
                                         "the document changed while the repair was shown; run it again")

    async def bench_document(self, uri: str) -> None:
        """Verify and time the saved file's kernels on the GPU (dice.benchOnSave), here or on the team
        server's GPU, then refresh the lenses. Untrusted, nothing runs: the lens and a message (once) say why."""
        if not self.settings.trusted:
            self.notices.once("bench", bench_skipped())
            shown = self.bench_reports.get(uri)
            if shown is None or shown.reason != NOT_BENCHMARKED:
                self.bench_reports[uri] = BenchReport(False, False, [], [], NOT_BENCHMARKED)
                self.refresh_lenses()
            return
        document = self.workspace.get_text_document(uri)
        path, text = Path(document.path), document.source
        if not await self.jobs.can_bench(self.tell) or not has_benchmark(path, text):
            return  # nothing says how to run this file's kernels
        token = await self.reports.begin("dice-lsp benchmark", path.name)
        try:
            report = await self.jobs.bench(BenchJob(self.document_job(f"bench {uri}", uri,
                                                                      self.reports.reporter(token))))
        except Cancelled:  # a newer save's benchmark replaced it
            self.reports.end(token, "cancelled")
            return
        except DiceError as exc:
            self.reports.end(token, str(exc))
            self.tell(f"dice-lsp: {exc}")
            return
        self.reports.end(token, "done")
        self.bench_reports[uri] = report
        self.refresh_lenses()

    def load_submitted(self) -> asyncio.Event:
        """Set once the settings are read and the first load is queued: requests that arrive earlier wait for
        it, not fail (nor run with the defaults)."""
        if self._load_submitted is None:
            self._load_submitted = asyncio.Event()
        return self._load_submitted

    def _told_cancelled(self, message: str) -> None:
        """Say in the client's log how far a cancelled generation got (also when its request is gone); called
        from the model's thread."""
        if self.loop is not None:
            self.loop.call_soon_threadsafe(self.window_log_message,
                                           types.LogMessageParams(types.MessageType.Log, f"dice-lsp: {message}"))

    async def complete(self, uri: str, position: types.Position) -> Completion | None:
        """The completion at `position`, here or on the team server; None when a newer request for the
        document replaced it, or it failed (logged)."""
        document = self.workspace.get_text_document(uri)
        text, settings = document.source, self.settings
        where = clamped(text, Position(position.line, position.character))
        await self.load_submitted().wait()
        asked = self.document_job(uri, uri)
        path = asked.path
        job = CompleteJob(asked, where, compiler=lambda: self.verdicts_for(path, text, settings),
                          front_end=lambda: self.front_end_for(path, text, settings),
                          sources=(self.index.source(exclude=str(path)),))
        try:
            completion = (await self.jobs.complete(job)).completion
        except Cancelled:
            return None
        except DiceError as exc:
            self.log(f"dice-lsp: {exc}")
            return None
        return self.told_outcome(completion, where, uri)

    def verdicts_for(self, path: Path, text: str, settings: Settings) -> Compiler | None:
        """nvcc's verdicts on multi-line fills of `text`, judged in the background (`CompileVerdicts`); None
        where the file is not compiled anyway (diagnostics off, no nvcc, not a CUDA file on disk)."""
        if not settings.diagnostics or self.nvcc is None or not self.checks.wants(str(path)) or not path.is_file():
            return None
        try:
            flags = self.flags_of(path, settings)
        except FlagError as exc:
            LOG.debug("no compile verdicts for %s: %s", path.name, exc)
            return None
        judge = nvcc_compiler(text, path.parent, flags, self.checks.cache, self.nvcc)
        return self.verdicts.compiler(judge, text, f"{path.parent}\0{flags}")

    def front_end_for(self, path: Path, text: str, settings: Settings) -> Compiler | None:
        """clang's front-end judge of fills of `text` (dice.typeCheck), with the file's compile flags; None
        without a clang that reads the CUDA headers."""
        folder = path.parent if path.is_file() else None
        try:
            flags = self.flags_of(path, settings) if folder is not None else settings.compile_flags(Path.cwd())
        except FlagError as exc:
            LOG.debug("no clang check for %s: %s", path.name, exc)
            return None
        return front_end_for(text, folder, flags, settings, self.nvcc)

    def told_outcome(self, completion: Completion | None, where: Position, uri: str) -> Completion | None:
        """A completion that shows nothing although the model filled the hole says why in the client's log
        (a Log message: the editor's output panel, never a pop-up); and every completion at a hole is told in
        `dice/completion` (shown or not, P(right), why not), for a status line that explains itself."""
        if completion is not None and completion.withheld:
            self.log(f"dice-lsp: no completion at line {where.line + 1}: {completion.withheld}", types.MessageType.Log)
        if completion is not None and completion.hole is not None:
            chances = completion.confidences or [None]
            self.protocol.notify(COMPLETION_NOTIFICATION, {
                "uri": uri, "line": where.line, "shown": bool(completion.texts),
                "confidence": chances[0] if completion.texts else None,
                "reason": None if completion.texts else completion.withheld})
        return completion

    async def fill_edit(self, uri: str, position: types.Position, version: int | None) -> types.WorkspaceEdit | None:
        """The edit that fills the hole at `position` with the best candidate, for the document `version`."""
        completion = await self.complete(uri, position)
        if completion is not None and completion.withheld:  # asked for explicitly: say why nothing changes
            self.tell(f"DICE: {completion.withheld}", types.MessageType.Info)
        if completion is None or not completion.texts:
            return None
        document = self.workspace.get_text_document(uri)
        if version is not None and document.version != version:
            return None  # the user kept typing: the fill was made for text that is gone
        edit = types.TextEdit(range=lsp_range(completion), new_text=completion.texts[0])
        return types.WorkspaceEdit(document_changes=[types.TextDocumentEdit(
            text_document=types.OptionalVersionedTextDocumentIdentifier(uri=uri, version=document.version),
            edits=[edit])])


server = DiceServer()


def lsp_range(completion: Completion) -> types.Range:
    return types.Range(types.Position(completion.start.line, completion.start.character),
                       types.Position(completion.end.line, completion.end.character))


@server.feature(types.INITIALIZE)
def initialize(ls: DiceServer, params: types.InitializeParams) -> None:
    ls.init_options = params.initialization_options
    ls.settings, ls.init_errors = ls.initial_settings()
    for error in ls.init_errors:
        LOG.warning("%s", error)


@server.feature(types.INITIALIZED)
async def initialized(ls: DiceServer, params: types.InitializedParams) -> None:
    ls.loop = asyncio.get_running_loop()
    if ls.client_log is None:
        ls.client_log = send_log_to_client(ls, ls.loop)
    ls.watch = FileWatch(ls.loop, ls.file_changed_on_disk)
    for folder in ls.workspace.folders.values():
        ls.loop.run_in_executor(None, ls.watch.watch, Path(to_fs_path(folder.uri) or folder.uri), True)
    workspace = ls.client_capabilities.workspace
    raw = None  # without workspace/configuration (or unread): the defaults and initializationOptions
    if workspace is not None and workspace.configuration:
        raw, _read = await ls.client_configuration()
    ls.settings, errors = ls.settings_from(raw)
    for error in [*ls.init_errors, *errors]:  # initializationOptions' own, once, with the configuration's
        ls.tell(error)
    ls.tell_untrusted()
    ls.index_workspace()
    try:
        await ls.load_model()
    except asyncio.CancelledError:  # the session ended while the model loaded (pygls would log a traceback)
        LOG.info("the session ended while the model was loading")


@server.feature(types.SHUTDOWN)
async def shutdown_request(ls: DiceServer, params: None) -> None:
    """Stop the model before answering (LSP: free resources, then reply), so `exit` finds nothing running."""
    if not await asyncio.to_thread(ls.host.close, MODEL_STOP_SECONDS):
        LOG.warning("the model thread is still busy after %.0f s", MODEL_STOP_SECONDS)


@server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
async def did_change_configuration(ls: DiceServer, params: types.DidChangeConfigurationParams) -> None:
    raw = params.settings  # the client's whole configuration, pushed (Neovim), or null: ask for the section
    workspace = ls.client_capabilities.workspace
    if isinstance(raw, dict) and "dice" in raw:
        raw = raw["dice"]
    elif workspace is not None and workspace.configuration:
        raw, read = await ls.client_configuration()
        if not read:
            return  # the settings in use stay
    await ls.apply_settings(raw)


@server.feature(types.TEXT_DOCUMENT_INLINE_COMPLETION, types.InlineCompletionOptions())
async def inline_completion(ls: DiceServer, params: types.InlineCompletionParams) -> types.InlineCompletionList | None:
    completion = await ls.complete(params.text_document.uri, params.position)
    if completion is None:
        return None
    rng = lsp_range(completion)
    checks: list[Checks | None] = [*completion.checks] if completion.checks else [None] * len(completion.texts)
    return types.InlineCompletionList(items=[
        types.InlineCompletionItem(insert_text=text, range=rng, command=checks_command(check))
        for text, check in zip(completion.texts, checks, strict=True) if text.strip()])


CHECKS_COMMAND = "dice.completionChecks"


def checks_command(checks: Checks | None) -> types.Command | None:
    """The checks a shown completion passed, carried by the item (`arguments[0]`: {"parses", "names",
    "compiles"}) and readable in its title; accepting the item runs the command, which only logs them."""
    if checks is None:
        return None
    marks = {True: "✓", False: "✗", None: "not checked"}
    title = "dice-lsp: " + " · ".join(f"{name} {marks[value]}" for name, value in checks.to_json().items())
    return types.Command(title=title, command=CHECKS_COMMAND, arguments=[checks.to_json()])


@server.command(CHECKS_COMMAND)
def completion_checks(ls: DiceServer, arguments: list[Any]) -> None:
    LOG.debug("completion accepted; its checks: %s", arguments)


@server.feature(types.TEXT_DOCUMENT_COMPLETION, types.CompletionOptions(trigger_characters=["\n"]))
async def completion(ls: DiceServer, params: types.CompletionParams) -> types.CompletionList | None:
    completion = await ls.complete(params.text_document.uri, params.position)
    if completion is None:
        return None
    rng = lsp_range(completion)
    items = []
    for index, text in enumerate(t for t in completion.texts if t.strip()):
        label = text.strip().splitlines()[0][:60]
        check = completion.checks[index] if completion.checks else None
        detail = "dice-lsp" if check is None else checks_command(check).title  # type: ignore[union-attr]
        items.append(types.CompletionItem(
            label=label, kind=types.CompletionItemKind.Snippet, detail=detail, sort_text=f"{index:03d}",
            filter_text=text.strip(), text_edit=types.TextEdit(range=rng, new_text=text),
            documentation=types.MarkupContent(types.MarkupKind.Markdown, f"```cuda\n{text}\n```")))
    return types.CompletionList(is_incomplete=True, items=items)


@server.feature(types.TEXT_DOCUMENT_CODE_ACTION, types.CodeActionOptions(
    code_action_kinds=[types.CodeActionKind.QuickFix, types.CodeActionKind.RefactorRewrite], resolve_provider=True))
def code_action(ls: DiceServer, params: types.CodeActionParams) -> list[types.CodeAction]:
    """"Fill hole" per `/*@fill*/` marker in the range (the model runs on resolve); "Repair" on nvcc errors and
    "Optimize kernel" per kernel in the range (commands: long jobs with progress, whose edit the user sees
    before it is applied)."""
    document = ls.workspace.get_text_document(params.text_document.uri)
    text = document.source
    first, last = params.range.start.line, params.range.end.line
    actions = []
    for start, _ in find_markers(text):
        where = position_at(text, start)
        if first <= where.line <= last:
            actions.append(types.CodeAction(
                title="Fill hole with DICE", kind=types.CodeActionKind.QuickFix,
                data={"uri": document.uri, "line": where.line, "character": where.character,
                      "version": document.version}))
    actions += repair_actions(document.uri, document.version, params.context.diagnostics)
    return actions + optimize_actions(document.uri, text, document.version, first, last)


@server.feature(types.CODE_ACTION_RESOLVE)
async def resolve_code_action(ls: DiceServer, action: types.CodeAction) -> types.CodeAction:
    """A "Fill hole" action gets its edit; the others carry a command and are returned as they are."""
    data = action.data if isinstance(action.data, dict) else {}
    if {"uri", "line", "character"} <= data.keys():
        action.edit = await ls.fill_edit(data["uri"], types.Position(data["line"], data["character"]),
                                         data.get("version"))
    return action


@server.command(FILL_COMMAND)
async def fill_command(ls: DiceServer, uri: str, position: dict[str, int]) -> bool:
    """`dice.fillHole(uri, {line, character})`: fill the hole there and apply the edit."""
    edit = await ls.fill_edit(uri, types.Position(position["line"], position["character"]), None)
    if edit is None:
        return False
    result = await ls.workspace_apply_edit_async(types.ApplyWorkspaceEditParams(edit=edit, label="DICE fill"))
    return bool(result.applied)


@server.command(OPTIMIZE_COMMAND)
async def optimize_command(ls: DiceServer, uri: str, kernel: str, version: int | None, *ask: bool) -> dict[str, Any]:
    """`dice.optimizeKernel(uri, kernel, version, ask = true)`: optimize, then offer the best rewrite (with `ask`
    false, a client that previews edits gets it back unapplied); returns the summary, the ranked report, the
    edit and whether it was applied."""
    return await ls.optimize_kernel(uri, kernel, version, all(ask))


@server.command(REPAIR_COMMAND)
async def repair_command(ls: DiceServer, uri: str, version: int | None, *ask: bool) -> dict[str, Any]:
    """`dice.repair(uri, version, ask = true)`: repair the document, then offer the edit (with `ask` false, a
    client that previews edits gets it back unapplied); returns the summary, the repair (its text, changes and
    errors left), the edit and whether it was applied."""
    return await ls.repair_document(uri, version, all(ask))


@server.feature(types.TEXT_DOCUMENT_DID_OPEN)
def did_open(ls: DiceServer, params: types.DidOpenTextDocumentParams) -> None:
    ls.document_opened(params.text_document.uri)
    ls.index.touch(to_fs_path(params.text_document.uri) or params.text_document.uri)  # kept over files not open


@server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
def did_close(ls: DiceServer, params: types.DidCloseTextDocumentParams) -> None:
    ls.checks.forget(params.text_document.uri)
    ls.reindex(params.text_document.uri)


@server.feature(types.TEXT_DOCUMENT_DID_SAVE)
async def did_save(ls: DiceServer, params: types.DidSaveTextDocumentParams) -> None:
    ls.document_opened(params.text_document.uri)
    ls.reindex(params.text_document.uri)
    if ls.settings.bench_on_save and ls.checks.wants(params.text_document.uri):
        await ls.bench_document(params.text_document.uri)


@server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
def did_change(ls: DiceServer, params: types.DidChangeTextDocumentParams) -> None:
    ls.check_document(params.text_document.uri, delay=IDLE_SECONDS)


@server.feature(types.TEXT_DOCUMENT_CODE_LENS)
def code_lens(ls: DiceServer, params: types.CodeLensParams) -> list[types.CodeLens]:
    """`regs · smem · spills` above each kernel of the last compile, and the last benchmark's results."""
    uri = params.text_document.uri
    report = ls.bench_reports.get(uri)
    bench = bench_lenses(ls.workspace.get_text_document(uri).source, report) if report is not None else []
    return ls.checks.lenses(uri) + bench
