"""What a client may do that the server must still answer as the LSP specification says: requests before
`initialize` or after `shutdown`, an exit while the model is still loading, a workspace/configuration
answer the server cannot read, positions outside the text, a document holding a lone surrogate.

Raw bytes to a real `dice-lsp lsp` process (`tests/lsp_wire.py`); the tests that load the model are few.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcInternalError

from dice_lsp.errors import DiceError
from dice_lsp.jobs import model_host
from dice_lsp.jobs.model_host import ModelHost
from dice_lsp.lsp import server
from dice_lsp.settings import Settings

from .lsp_wire import LspProcess, frame, initialize

SERVER_NOT_INITIALIZED, INVALID_REQUEST = -32002, -32600
EXIT_WAIT_S = 90.0  # generous: the model thread finishes reading its checkpoint first
ABORT = "terminate called without an active exception"


@pytest.fixture
def lsp(tmp_path: Path) -> Iterator[LspProcess]:
    process = LspProcess(tmp_path)
    try:
        yield process
    finally:
        process.close()


def request(msg_id: int, method: str, params: Any = None) -> bytes:
    return frame({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})


def notification(method: str, params: Any = None) -> bytes:
    return frame({"jsonrpc": "2.0", "method": method, "params": params})


def test_shutdown_before_initialize_is_server_not_initialized_and_initialize_still_works(lsp: LspProcess) -> None:
    lsp.send(request(1, "shutdown") + notification("initialized", {}) + frame(initialize(2)))
    assert lsp.replies.next(60) == {"jsonrpc": "2.0", "id": 1, "error": {
        "code": SERVER_NOT_INITIALIZED, "message": "shutdown before initialize: send initialize first"}}
    reply = lsp.replies.next()  # the notification before initialize was dropped without a word
    assert reply is not None and reply["id"] == 2 and reply["result"]["serverInfo"]["name"] == "dice-lsp", reply
    lsp.send(request(3, "shutdown"))
    assert lsp.replies.next() == {"jsonrpc": "2.0", "id": 3, "result": None}
    lsp.send(notification("exit"))
    assert lsp.process.wait(timeout=30) == 0


def test_a_request_after_shutdown_is_an_invalid_request(lsp: LspProcess) -> None:
    lsp.send(frame(initialize(1)))
    assert lsp.replies.next(60) is not None
    lsp.send(request(2, "shutdown") + request(3, "workspace/executeCommand", {"command": "dice.fillHole"}))
    replies = sorted((lsp.replies.next() or {} for _ in range(2)), key=lambda reply: reply.get("id", 0))
    assert replies == [{"jsonrpc": "2.0", "id": 2, "result": None}, {"jsonrpc": "2.0", "id": 3, "error": {
        "code": INVALID_REQUEST, "message": "workspace/executeCommand after shutdown: only exit is handled now"}}]


def test_exit_before_initialize_exits_with_1(lsp: LspProcess) -> None:
    lsp.send(notification("exit"))
    assert lsp.process.wait(timeout=60) == 1  # LSP: exit without shutdown is exit code 1


def start_loading(lsp: LspProcess) -> None:
    """initialize + initialized: the model starts loading on its thread."""
    lsp.send(frame(initialize(1, device="cpu")))
    assert lsp.replies.next(60) is not None
    lsp.send(notification("initialized", {}))


def test_shutdown_and_exit_while_the_model_loads_exit_0(lsp: LspProcess) -> None:
    start_loading(lsp)
    lsp.send(request(2, "shutdown"))
    assert lsp.replies.next(EXIT_WAIT_S) == {"jsonrpc": "2.0", "id": 2, "result": None}
    lsp.send(notification("exit"))
    assert lsp.process.wait(timeout=EXIT_WAIT_S) == 0, lsp.stderr()
    assert ABORT not in lsp.stderr() and "Traceback" not in lsp.stderr(), lsp.stderr()


@pytest.mark.parametrize(("ending", "code"), [("stdin closed", 0), ("exit without shutdown", 1)])
def test_a_session_ending_while_the_model_loads_exits_without_a_trace(lsp: LspProcess, ending: str,
                                                                       code: int) -> None:
    start_loading(lsp)
    if ending == "stdin closed":
        lsp.stdin.close()
    else:
        lsp.send(notification("exit"))
    assert lsp.process.wait(timeout=EXIT_WAIT_S) == code, lsp.stderr()
    assert ABORT not in lsp.stderr() and "Traceback" not in lsp.stderr(), lsp.stderr()


class SlowCheckpoint:
    """A `load_model` stand-in that reads its checkpoint until released (as safetensors does, in native
    code that must not be running when the interpreter finalizes)."""

    def __init__(self) -> None:
        self.started, self.release, self.finished = threading.Event(), threading.Event(), threading.Event()

    def __call__(self, *args: Any) -> Any:
        self.started.set()
        assert self.release.wait(30), "never released"
        self.finished.set()
        raise DiceError("no model in this test")


@pytest.fixture
def slow(monkeypatch: pytest.MonkeyPatch) -> SlowCheckpoint:
    checkpoint = SlowCheckpoint()
    monkeypatch.setattr(model_host, "load_model", checkpoint)
    return checkpoint


def test_closing_the_model_host_waits_for_the_load_in_progress(slow: SlowCheckpoint) -> None:
    host = ModelHost(lambda status: None)
    host.load(Settings())
    assert slow.started.wait(30)
    assert host.close(0.01) is False  # still reading: the caller must not exit yet
    slow.release.set()
    assert host.close(30) is True
    assert slow.finished.is_set()


def test_the_shutdown_request_is_answered_once_the_model_thread_has_stopped(slow: SlowCheckpoint) -> None:
    ls = server.DiceServer()
    ls.host.load(Settings())
    assert slow.started.wait(30)
    threading.Timer(0.2, slow.release.set).start()
    asyncio.run(server.shutdown_request(ls, None))
    assert slow.finished.is_set(), "shutdown answered while the model thread was still reading its checkpoint"
    assert ls.host.close() is True


KERNEL = "__global__ void k(float* out, int n) {\n    \n}\n"
CONFIGURATION_FAILED = "workspace/configuration failed"


@pytest.mark.parametrize("answer", [{"result": 5}, {"error": {"code": -32603, "message": "no settings here"}}],
                         ids=["not a list", "an error"])
def test_a_configuration_the_server_cannot_read_keeps_the_defaults_and_completion_answers(
        lsp: LspProcess, answer: dict[str, Any]) -> None:
    init = initialize(1, device="cpu", steps=2, maxCanvas=8)
    init["params"]["capabilities"] = {"workspace": {"configuration": True}}
    lsp.send(frame(init))
    assert lsp.replies.next(60) is not None
    lsp.send(notification("initialized", {}))
    asked = lsp.replies.request("workspace/configuration", 60)
    lsp.send(frame({"jsonrpc": "2.0", "id": asked["id"], **answer}))
    uri = "file:///tmp/kernel.cu"
    lsp.send(notification("textDocument/didOpen", {"textDocument": {
        "uri": uri, "languageId": "cuda-cpp", "version": 1, "text": KERNEL}}))
    lsp.send(request(2, "textDocument/inlineCompletion", {
        "textDocument": {"uri": uri}, "position": {"line": 1, "character": 4}, "context": {"triggerKind": 1}}))
    reply = lsp.replies.next(EXIT_WAIT_S)
    assert reply is not None and reply["id"] == 2 and "error" not in reply, reply
    assert isinstance(reply["result"]["items"], list), reply
    said = [n["params"] for n in lsp.replies.notifications
            if n["method"] == "window/logMessage" and CONFIGURATION_FAILED in n["params"]["message"]]
    assert [p["type"] for p in said] == [2], said  # once, as a warning to the client (not an error on stderr)
    assert CONFIGURATION_FAILED not in lsp.stderr()


INVALID_PARAMS = -32602
SURROGATE_KERNEL = "// caf\ud800\n__global__ void k(float* out, int n) {\n    \n}\n"  # a lone surrogate


def test_every_inline_completion_is_answered_whatever_its_position_and_text(lsp: LspProcess) -> None:
    lsp.send(frame(initialize(1, device="cpu", steps=2, maxCanvas=8)))
    assert lsp.replies.next(60) is not None
    lsp.send(notification("initialized", {}))
    uri = "file:///tmp/kernel.cu"
    lsp.send(notification("textDocument/didOpen", {"textDocument": {  # JSON spells the surrogate "\\ud800"
        "uri": uri, "languageId": "cuda-cpp", "version": 1, "text": SURROGATE_KERNEL}}))

    def complete(msg_id: int, line: int, character: int) -> dict[str, Any]:
        lsp.send(request(msg_id, "textDocument/inlineCompletion", {"textDocument": {"uri": uri}, "position": {
            "line": line, "character": character}, "context": {"triggerKind": 1}}))
        reply = lsp.replies.next(EXIT_WAIT_S)
        assert reply is not None and reply["id"] == msg_id, reply
        return reply

    for msg_id, (line, character) in enumerate([(-1, 0), (2, -1), (2, 2**32)], start=2):  # not LSP uintegers
        assert complete(msg_id, line, character)["error"] == {
            "code": INVALID_PARAMS, "message": "textDocument/inlineCompletion: the params do not fit the method"}
    at_end = complete(5, 2, 2**31 - 1)["result"]  # past the line's end: the line's end, as LSP says
    assert isinstance(at_end["items"], list)
    assert all(item["range"]["start"] == {"line": 2, "character": 4} for item in at_end["items"]), at_end
    assert complete(7, 2, 4)["result"] == at_end  # the same answer as at the line's end (greedy: deterministic)
    assert complete(6, 99, 0)["result"] is None  # a line past the text: nothing to fill there
    assert "UnicodeEncodeError" not in lsp.stderr()


def test_a_configuration_change_the_server_cannot_read_keeps_the_settings_in_use() -> None:
    ls = server.DiceServer()
    ls.protocol.client_capabilities = types.ClientCapabilities(
        workspace=types.WorkspaceClientCapabilities(configuration=True))
    ls.settings = Settings(steps=7, seed=3)
    asked: list[types.ConfigurationParams] = []

    async def refuse(params: types.ConfigurationParams) -> list[Any]:
        asked.append(params)
        raise JsonRpcInternalError("no settings here")

    ls.workspace_configuration_async = refuse  # type: ignore[method-assign]
    asyncio.run(server.did_change_configuration(ls, types.DidChangeConfigurationParams(settings=None)))
    assert [item.section for params in asked for item in params.items] == ["dice"]
    assert ls.settings == Settings(steps=7, seed=3)
    ls.host.close()
