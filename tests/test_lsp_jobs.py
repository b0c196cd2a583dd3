"""The language server's jobs (`dice_lsp.jobs.api.Jobs`): one choice from the settings, typed results from a
team server's replies, and cancellation that is never a normal answer."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types

from dice_lsp.errors import Cancelled, DiceError
from dice_lsp.jobs.api import CompleteJob, Document, OptimizeJob
from dice_lsp.jobs.local import LocalJobs
from dice_lsp.jobs.model_host import ModelHost, Ticket
from dice_lsp.lsp import server
from dice_lsp.remote.team import TeamJobs, TeamServer
from dice_lsp.settings import Settings
from dice_lsp.textdoc import Position
from dice_lsp.toolchain.flags import CompileFlags

TEAM = Settings(server_url="tcp://127.0.0.1:9")
WHERE = Position(1, 4)


class FakeClient:
    """Stands for `RemoteClient`: answers each call with `reply`, or holds it until cancelled."""

    def __init__(self, reply: Any = None, hold: bool = False) -> None:
        self.reply, self.hold = reply, hold
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.address = "tcp://127.0.0.1:9"

    async def call(self, method: str, params: dict[str, Any] | None = None, progress: Any = None) -> Any:
        self.calls.append((method, params or {}))
        if self.hold:
            await asyncio.Event().wait()
        return self.reply

    async def close(self) -> None:
        return None


def team_with(client: FakeClient) -> TeamServer:
    team = TeamServer(TEAM, lambda status, failure: None)
    team.client = client  # type: ignore[assignment]
    team.state = "ready"
    return team


def job(key: str = "file:///k.cu", settings: Settings = TEAM) -> Document:
    return Document(Path("/tmp/k.cu"), "__global__ void k() {\n    \n}\n", settings, CompileFlags, key=key)


def test_the_settings_pick_this_machine_or_a_new_link_to_the_team_server() -> None:
    ls = server.DiceServer()
    assert ls.jobs_for(Settings()) is ls.local
    chosen = ls.jobs_for(TEAM)
    assert isinstance(chosen, TeamJobs) and chosen.address == "tcp://127.0.0.1:9"
    assert ls.jobs_for(TEAM) is not chosen  # a new link for new settings
    ls.host.close()


def test_a_team_servers_completion_comes_back_typed() -> None:
    reply = {"items": [{"text": "int i = 0;", "range": {"start": {"line": 1, "character": 4},
                                                         "end": {"line": 1, "character": 4}},
                        "checks": {"parses": True, "names": True, "compiles": None}}],
             "hole": "line", "withheld": None, "latency_ms": 12.5}
    client = FakeClient(reply)
    completion = asyncio.run(TeamJobs(team_with(client)).complete(CompleteJob(job(), WHERE))).completion
    assert completion.texts == ["int i = 0;"] and completion.start == WHERE and completion.hole == "line"
    [(method, params)] = client.calls
    assert method == "complete" and (params["line"], params["character"]) == (1, 4)


def test_a_reply_this_version_cannot_read_is_one_line_naming_the_server_and_method() -> None:
    with pytest.raises(DiceError, match=r"its optimize reply does not read as this dice-lsp's .*KeyError"):
        asyncio.run(TeamJobs(team_with(FakeClient({"kernel": "k"}))).optimize(OptimizeJob(job(), "k")))


def test_a_newer_request_for_the_key_makes_the_older_raise_cancelled() -> None:
    async def run() -> None:
        team = team_with(FakeClient(hold=True))
        first = asyncio.ensure_future(team.ask("file:///k.cu", "complete", {}))
        await asyncio.sleep(0)
        second = asyncio.ensure_future(team.ask("file:///k.cu", "complete", {}))
        with pytest.raises(Cancelled, match="replaced by a newer request"):
            await first
        second.cancel()  # its own task cancelled ($/cancelRequest): the cancellation goes on
        with pytest.raises(asyncio.CancelledError):
            await second
        assert team.calls == {} and team.superseded == set()

    asyncio.run(run())


def test_a_cancelled_local_job_stops_its_thread_before_the_cancellation_goes_on() -> None:
    host = ModelHost(lambda status: None)
    local = LocalJobs(host, on_cancelled=lambda message: None)
    started, stopped = threading.Event(), threading.Event()

    def work(ticket: Ticket) -> str:
        started.set()
        while not ticket():
            time.sleep(0.01)
        stopped.set()
        raise Cancelled("stopped after 1 model call")

    async def run() -> None:
        task = asyncio.ensure_future(local.in_thread("optimize file:///k.cu", work))
        while not started.is_set():
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert stopped.is_set(), "the cancellation went on while the work still ran"

    asyncio.run(run())
    host.close()


def initialized_server() -> tuple[server.DiceServer, str]:
    """A language server with one open document and no client capabilities (no `$/progress`)."""
    ls = server.DiceServer()
    initializing = ls.protocol.lsp_initialize(types.InitializeParams(capabilities=types.ClientCapabilities()))
    next(initializing, None)  # pygls sets up the workspace (this instance registers no handlers of its own)
    uri = "file:///tmp/k.cu"
    ls.workspace.put_text_document(types.TextDocumentItem(uri, "cuda-cpp", 1, job().text))
    return ls, uri


def test_a_rewrite_whose_request_is_cancelled_re_raises_the_cancellation() -> None:
    ls, uri = initialized_server()
    started: list[Document] = []

    async def held(document: Document) -> str:
        started.append(document)
        await asyncio.Event().wait()
        return "never"

    async def run() -> None:
        ls.load_submitted().set()
        task = asyncio.ensure_future(ls.rewrite_job(uri, 1, "optimize", held))
        while not started:
            await asyncio.sleep(0.01)
        task.cancel()  # what pygls does on $/cancelRequest: it then answers RequestCancelled
        with pytest.raises(asyncio.CancelledError):
            await task
        assert started[0].key == f"optimize {uri}" and started[0].text == job().text

    asyncio.run(run())
    ls.host.close()


@pytest.mark.parametrize(("failure", "told"), [(asyncio.CancelledError(), "optimize cancelled"),
                                               (Cancelled("replaced"), "optimize cancelled"),
                                               (DiceError("nvcc: no such arch"), "nvcc: no such arch")],
                         ids=["progress cancelled", "replaced", "failed"])
def test_a_rewrite_the_user_stopped_or_that_failed_answers_what_to_tell(failure: BaseException, told: str) -> None:
    ls, uri = initialized_server()

    async def fails(_document: Document) -> str:
        raise failure

    async def run() -> tuple[str | None, str]:
        ls.load_submitted().set()
        return await ls.rewrite_job(uri, 1, "optimize", fails)

    assert asyncio.run(run()) == (None, told)
    ls.host.close()


def test_a_rewrite_offered_for_an_older_version_is_refused() -> None:
    ls, uri = initialized_server()

    async def run() -> tuple[str | None, str]:
        ls.load_submitted().set()
        return await ls.rewrite_job(uri, 0, "repair", lambda _document: asyncio.sleep(0, "never"))

    assert asyncio.run(run()) == (None, "the document changed since the action was offered; run it again")
    ls.host.close()
