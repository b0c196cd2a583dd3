"""The jobs on a team server (`jobs.api.Jobs`): each job one request to `dice-lsp serve` (or its Ray gateway)
through `TeamServer`, its reply read back into the same typed result as a local run's (`from_json`, here at the
wire), so no caller reads a result by key nor branches on where a job runs. The command line (`--server`) and
the language server (`dice.server.url`) both use it.

A request carries the document's text (and, for the file jobs, the local headers it includes and the reference
its kernels are measured against: `file_request`; an untrusted workspace's compilation databases stay here),
the job's own parameters (`params` of its request) and the settings the caller chose (those that differ from
the defaults: the server's own fill in the rest, and a server whose limits are tight refuses only what was
asked). A completion also carries what the caller's own sources (its workspace index) propose: the server has
the document, not the workspace.

`TeamServer` is the link: a newer request for the same key (a document's completion) cancels the older one on
the server, whose `ask` then raises `Cancelled` (as a fill cancelled on this machine's model does), while an
`ask` whose own task is cancelled re-raises `asyncio.CancelledError`. Where someone watches the link's state
(the editor's status bar), a server that cannot be reached or refuses the token turns it to `error` with the
reason, once, and the next request that succeeds turns it back to `ready`. The client reconnects by itself.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from dice_lsp import __version__
from dice_lsp.address import parse_address
from dice_lsp.errors import Cancelled, DiceError
from dice_lsp.jobs.api import Completed, Starting
from dice_lsp.jobs.status import ModelStatus
from dice_lsp.remote.client import ProgressListener, RemoteClient, file_request, read_token
from dice_lsp.remote.limits import MAX_PROPOSAL_CHARS, MAX_PROPOSALS
from dice_lsp.remote.protocol import RemoteError
from dice_lsp.settings import Settings
from dice_lsp.toolchain.flags import DATABASE

if TYPE_CHECKING:
    from dice_lsp.completion.sources import Source
    from dice_lsp.harness.bench import BenchReport
    from dice_lsp.jobs.api import BenchJob, CheckJob, CompleteJob, Document, OptimizeJob, RepairJob
    from dice_lsp.optimize import OptimizeReport, RepairResult
    from dice_lsp.textdoc import Position
    from dice_lsp.toolchain.report import CheckReport

T = TypeVar("T")
LINK_FAILURES = ("unreachable", "connection_lost", "unauthorized")
StatusListener = Callable[[ModelStatus, RemoteError | None], None]


class TeamServer:
    """The link to the team server of `settings` (`server_url`, its token or token file); `on_status` hears each
    change of its state (None: nobody watches it, and no request asks after it)."""

    def __init__(self, settings: Settings, on_status: StatusListener | None = None) -> None:
        assert settings.server_url is not None
        self.client = RemoteClient(parse_address(settings.server_url),
                                   lambda: read_token(settings.server_token, settings.server_token_file))
        self.on_status = on_status
        self.state: str | None = None  # the last state told
        self.calls: dict[str, asyncio.Future[Any]] = {}  # the request in flight per key
        self.superseded: set[asyncio.Future[Any]] = set()  # calls cancelled by a newer one for their key

    async def check(self, failure: RemoteError | None = None) -> None:
        """Ask the server how it is (unless `failure` already says) and tell a change of state."""
        address = str(self.client.address)
        status: ModelStatus
        if failure is None:
            try:
                found = await self.client.call("status")
                status = ModelStatus.ready(found.get("model"), found.get("device"), found.get("dtype"), address)
            except DiceError as exc:
                failure = exc if isinstance(exc, RemoteError) else RemoteError("unreachable", str(exc))
        if failure is not None:
            status = ModelStatus.failed(address, str(failure), failure.code)
        if status.state != self.state:
            self.state = status.state
            if self.on_status is not None:
                self.on_status(status, failure)

    async def ask(self, key: str, method: str, params: dict[str, Any],
                  progress: ProgressListener | None = None) -> Any:
        """`method` on the server; a newer `ask` for `key` cancels it."""
        previous = self.calls.pop(key, None)
        if previous is not None:
            self.superseded.add(previous)
            previous.cancel()
        call = asyncio.ensure_future(self.client.call(method, params, progress))
        self.calls[key] = call
        try:
            result = await call
        except RemoteError as exc:
            if exc.code in LINK_FAILURES and self.on_status is not None:
                await self.check(exc)
            raise
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if call in self.superseded and (task is None or not task.cancelling()):
                raise Cancelled(f"{method}: replaced by a newer request") from None
            raise
        finally:
            self.superseded.discard(call)
            if self.calls.get(key) is call:
                del self.calls[key]
        if self.state != "ready" and self.on_status is not None:
            await self.check()
        return result

    async def close(self) -> None:
        for call in self.calls.values():
            call.cancel()
        await self.client.close()


@dataclass(frozen=True)
class ServerStatus:
    """A team server's `status` reply: its model's state (`ready`, `loading`, `error`), the model and where it
    runs, why it is not ready, the load, and the reply as it came for `--json`."""

    state: str | None
    model: str | None
    device: str | None
    dtype: str | None
    message: str | None
    in_flight: int
    queued: int
    served: int
    fill_steps: int  # model calls of fills
    step_rows: int  # rows over those calls (batching: several requests share a call)
    uptime_s: float
    version: str
    json: dict[str, Any]

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ServerStatus:
        return cls(data.get("state"), data.get("model"), data.get("device"), data.get("dtype"), data.get("message"),
                   int(data["in_flight"]), int(data["queued"]), int(data["served"]), int(data.get("fill_steps") or 0),
                   int(data.get("step_rows") or 0), float(data["uptime_s"]), str(data["version"]), data)

    @property
    def rows_per_call(self) -> float:
        return self.step_rows / self.fill_steps if self.fill_steps else 1.0


def read_reply(server: str, method: str, reply: Any, read: Callable[[Any], T]) -> T:
    """A team server's reply to `method` read into a typed result (`from_json`); one that this version cannot
    read (a server of another version) is a `DiceError` naming the server and the method, not a traceback."""
    try:
        return read(reply)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise DiceError(f"{server}: its {method} reply does not read as this dice-lsp's ({__version__}): "
                        f"{type(exc).__name__}: {exc} (is the server another version?)") from exc


def chosen(settings: Settings) -> dict[str, Any]:
    """The settings a request carries: those of `Settings.per_request` that differ from the defaults."""
    defaults = Settings().per_request()
    return {name: value for name, value in settings.per_request().items() if value != defaults[name]}


def proposals(text: str, where: Position, sources: tuple[Source, ...]) -> list[dict[str, Any]]:
    """What the caller's `sources` (its workspace index) propose at `where`, as a completion request carries
    them (`remote.limits.check_proposals`)."""
    from dice_lsp.complete import lf_text
    from dice_lsp.textdoc import offset_at

    if not sources:
        return []
    lf = lf_text(text)[0]
    cursor = offset_at(lf, where)
    found = [c for source in sources for c in source.candidates(lf[:cursor], lf[cursor:])]
    return [{"text": c.text, "score": min(1.0, max(0.0, c.score)), "files": int(getattr(c, "files", 1)),
             "rivals": int(getattr(c, "rivals", 0))}
            for c in found if c.text.strip() and "\n" not in c.text and len(c.text) <= MAX_PROPOSAL_CHARS
            ][:MAX_PROPOSALS]


def files(document: Document, reference: bool = False) -> dict[str, Any]:
    """The document and the local headers it includes as a request's files (no compilation database from an
    untrusted workspace); with `reference`, the reference its kernels are measured against (the one it names
    or has beside it where it was given none)."""
    from dice_lsp.harness.bench import kernelbench_reference

    ref = document.ref or (kernelbench_reference(document.path, document.text, None) if reference else None)
    request = file_request(document.path, document.text, ref if ref is not None and ref.is_file() else None)
    if not document.settings.trusted:
        request["files"] = {name: text for name, text in request["files"].items() if Path(name).name != DATABASE}
    return request


class TeamJobs:
    """A team server's jobs, through `team`."""

    def __init__(self, team: TeamServer) -> None:
        self.team = team
        self.address = str(team.client.address)

    def start(self, settings: Settings) -> Starting:
        async def ready() -> str:
            await self.team.check()
            return "ready"

        return Starting(None, ready())

    async def ask(self, document: Document, method: str, params: dict[str, Any], read: Callable[[Any], T]) -> T:
        """`method` for `document` with `params` and the settings it runs with, its reply read by `read`."""
        said = document.said
        listener = None if said is None else (lambda update: said(update["message"]))
        sent = {**params, "settings": chosen(document.settings)}
        return read_reply(self.address, method, await self.team.ask(document.key, method, sent, listener), read)

    async def complete(self, job: CompleteJob) -> Completed:
        from dice_lsp.complete import Completion

        document = job.document
        found = proposals(document.text, job.position, job.sources)
        params = {"text": document.text, **job.params(), **({"proposals": found} if found else {})}
        return await self.ask(document, "complete", params, lambda reply: Completed(
            Completion.from_json(reply, job.position), str(reply.get("model")), str(reply.get("device")),
            self.address, reply))

    async def check(self, job: CheckJob) -> CheckReport:
        from dice_lsp.toolchain.report import CheckReport

        return await self.ask(job.document, "check", files(job.document), lambda found: replace(
            CheckReport.from_json(found, found["elapsed_ms"]), cached=found["cached"]))

    async def can_bench(self, tell: Callable[[str], None]) -> bool:
        return True  # the team server's GPU: it says itself when it has none

    async def bench(self, job: BenchJob) -> BenchReport:
        from dice_lsp.harness.bench import BenchReport

        params = {**files(job.document, reference=True), **job.params()}
        return await self.ask(job.document, "bench", params, BenchReport.from_json)

    async def optimize(self, job: OptimizeJob) -> OptimizeReport:
        from dice_lsp.optimize import OptimizeReport

        params = {**files(job.document, reference=True), **job.params()}
        return await self.ask(job.document, "optimize", params, OptimizeReport.from_json)

    async def repair(self, job: RepairJob) -> RepairResult:
        from dice_lsp.optimize import RepairResult

        return await self.ask(job.document, "repair", {**files(job.document), **job.params()},
                              RepairResult.from_json)

    async def status(self) -> ServerStatus:
        """The server's health and load (`dice-lsp status`)."""
        return read_reply(self.address, "status", await self.team.ask("status", "status", {}),
                          ServerStatus.from_json)

    async def close(self) -> None:
        await self.team.close()


__all__ = ["LINK_FAILURES", "ServerStatus", "TeamJobs", "TeamServer", "chosen", "files", "proposals", "read_reply"]
