"""`dice-lsp lsp --tcp/--ws`: loopback only without a token; with one, only the client whose initialize
carries it (or, on WebSocket, whose upgrade request has `Authorization: Bearer`) is served, and nothing
another connection sends disturbs it.

Real processes and sockets; the model never loads (no `initialized` is sent).
"""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .lsp_wire import LspProcess, SocketClient, frame, free_port, initialize, lsp_command, lsp_env

TOKEN = "b7e1f0c2-test-token"
REQUEST_FAILED, SERVER_NOT_INITIALIZED, PARSE_ERROR, METHOD_NOT_FOUND = -32803, -32002, -32700, -32601
# what an attacker sent before: compile flags that nvcc's shell runs, then a file to compile
HOSTILE_OPTIONS = {"defines": ["X=$(touch /tmp/dice-lsp-pwned)"], "diagnostics": True}
HOSTILE_OPEN = {"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": {
    "uri": "file:///tmp/a.cu", "languageId": "cuda-cpp", "version": 1, "text": "__global__ void k() {}\n"}}}


def write_token(folder: Path) -> Path:
    path = folder / "token"
    path.write_text(TOKEN + "\n")
    path.chmod(0o600)
    return path


def start(folder: Path, kind: str, token: bool = True) -> tuple[LspProcess, int]:
    port = free_port()
    tokens = ["--token-file", str(write_token(folder))] if token else []
    lsp = LspProcess(folder, f"--{kind}", f"127.0.0.1:{port}", *tokens)
    lsp.wait_listening()
    return lsp, port


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """A TCP language server with a token that admits nobody in this module: its port."""
    lsp, port = start(tmp_path_factory.mktemp("guarded"), "tcp")
    try:
        yield port
    finally:
        assert lsp.process.poll() is None, "a refused connection stopped the server"
        lsp.close()


def refused(port: int, data: bytes) -> dict[str, Any] | None:
    """Send `data` on a fresh connection; the one reply, after checking that the server then closed it."""
    client = SocketClient(port)
    try:
        client.send(data)
        reply = client.replies.next()
        assert client.replies.next() is None, "the connection stayed open"
        return reply
    finally:
        client.close()


def error(msg_id: int | None, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": message}}


def test_initialize_without_the_token_is_refused_and_closed(guarded: int) -> None:
    assert refused(guarded, frame(initialize(1, **HOSTILE_OPTIONS)) + frame(HOSTILE_OPEN)) == error(
        1, REQUEST_FAILED, "unauthorized: a token is required (initializationOptions.authToken)")


def test_a_wrong_token_is_refused_and_closed(guarded: int) -> None:
    assert refused(guarded, frame(initialize(2, token="guess", **HOSTILE_OPTIONS)) + frame(HOSTILE_OPEN)) == error(
        2, REQUEST_FAILED, "unauthorized: wrong token (initializationOptions.authToken)")


def test_a_first_message_other_than_initialize_is_refused_and_closed(guarded: int) -> None:
    assert refused(guarded, frame(HOSTILE_OPEN)) == error(
        None, SERVER_NOT_INITIALIZED,
        "the first message must be an initialize request carrying initializationOptions.authToken")


def test_bytes_that_are_not_lsp_are_refused_and_closed(guarded: int) -> None:
    assert refused(guarded, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n") == error(
        None, PARSE_ERROR, "'GET / HTTP/1.1' is not a header")


@pytest.mark.parametrize("token", [TOKEN, None], ids=["token", "loopback-without-token"])
def test_one_client_is_admitted_and_other_connections_cannot_disturb_it(tmp_path: Path, token: str | None) -> None:
    lsp, port = start(tmp_path, "tcp", token is not None)
    editor = SocketClient(port)
    try:
        editor.send(frame(initialize(1, token=token)))
        admitted = editor.replies.next()
        assert admitted is not None and admitted["id"] == 1 and admitted["result"]["serverInfo"]["name"] == "dice-lsp"

        if token is not None:
            assert refused(port, frame(initialize(7))) == error(
                7, REQUEST_FAILED, "unauthorized: a token is required (initializationOptions.authToken)")
        socket.create_connection(("127.0.0.1", port)).close()  # pygls dropped the editor for this
        assert refused(port, frame(initialize(8, token=token))) == error(
            8, REQUEST_FAILED, "another client is using this language server (one at a time)")

        editor.send(b"Content-Length: 1000000000000\r\n\r\n{" + frame({"jsonrpc": "2.0", "id": 2, "method": "x/y"}))
        assert editor.replies.next() == error(None, PARSE_ERROR,
                                              "a message of 1000000000000 bytes is over the limit of 67108864")
        reply = editor.replies.next()  # the same framing as on stdio, and the reply comes to the editor
        assert reply is not None and reply["id"] == 2 and reply["error"]["code"] == METHOD_NOT_FOUND
        assert lsp.process.poll() is None
    finally:
        editor.close()
    assert lsp.process.wait(timeout=20) == 0  # the session's end ends the server, as before
    lsp.close()


def test_websocket_takes_the_token_as_a_bearer_header_or_in_initialize(tmp_path: Path) -> None:
    from websockets.exceptions import ConnectionClosed, InvalidStatus
    from websockets.sync.client import connect

    lsp, port = start(tmp_path, "ws")
    url = f"ws://127.0.0.1:{port}"
    try:
        with pytest.raises(InvalidStatus) as rejected:
            connect(url, additional_headers={"Authorization": "Bearer guess"}, open_timeout=15)
        assert rejected.value.response.status_code == 401

        with connect(url, open_timeout=15) as anonymous:
            anonymous.send(json.dumps(initialize(1, **HOSTILE_OPTIONS)))
            assert json.loads(anonymous.recv(timeout=15)) == error(
                1, REQUEST_FAILED, "unauthorized: a token is required (initializationOptions.authToken)")
            with pytest.raises(ConnectionClosed):  # and closed
                anonymous.recv(timeout=15)

        with connect(url, additional_headers={"Authorization": f"Bearer {TOKEN}"}, open_timeout=15) as editor:
            editor.send(json.dumps(initialize(2)))
            admitted = json.loads(editor.recv(timeout=15))
            assert admitted["id"] == 2 and admitted["result"]["serverInfo"]["name"] == "dice-lsp"
            editor.send("{not json")
            assert json.loads(editor.recv(timeout=15)) == error(None, PARSE_ERROR, "the message is not JSON (Expecting "
                                                               "property name enclosed in double quotes: line 1 "
                                                               "column 2 (char 1))")
            editor.send(json.dumps({"jsonrpc": "2.0", "id": 3, "method": "dice/noSuchMethod"}))
            assert json.loads(editor.recv(timeout=15))["error"]["code"] == METHOD_NOT_FOUND
    finally:
        lsp.close()


def run_lsp(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(lsp_command(*args), capture_output=True, text=True, env=lsp_env(), timeout=60,
                          stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("kind", ["tcp", "ws"])
def test_an_address_beyond_loopback_needs_a_token(kind: str) -> None:
    done = run_lsp(f"--{kind}", "192.0.2.1:7078")  # TEST-NET-1: never this machine's address
    assert done.returncode == 2
    assert done.stderr == ("dice-lsp: error: refusing to listen on 192.0.2.1 without a token: pass --token-file "
                           "(anyone who can reach the port could run code on this GPU host)\n")


def test_a_missing_token_file_is_one_line_and_exit_2(tmp_path: Path) -> None:
    done = run_lsp("--tcp", f"127.0.0.1:{free_port()}", "--token-file", str(tmp_path / "nope"))
    assert (done.returncode, done.stderr) == (2, f"dice-lsp: error: token file {tmp_path / 'nope'}: "
                                                 "No such file or directory\n")


def test_a_port_in_use_is_one_line_and_exit_2() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = run_lsp("--tcp", f"127.0.0.1:{port}")
    assert done.returncode == 2
    assert done.stderr.endswith(f"dice-lsp: error: cannot listen on 127.0.0.1:{port}: Address already in use\n")
    assert len(done.stderr.splitlines()) == 1


def test_a_silent_connection_is_closed_after_the_admission_time(monkeypatch: pytest.MonkeyPatch) -> None:
    from dice_lsp.lsp import transport
    from dice_lsp.remote.server import TokenFile

    monkeypatch.setattr(transport, "ADMISSION_SECONDS", 0.2)
    gate = transport.LspGate(TokenFile(None))

    async def silent() -> None:
        await asyncio.sleep(60)

    started = time.monotonic()
    assert asyncio.run(gate.admit(silent, "peer")) == transport.Admission(None)
    assert time.monotonic() - started < 5 and gate.waiting == 0


def test_connections_waiting_for_admission_are_bounded() -> None:
    from dice_lsp.lsp import transport
    from dice_lsp.remote.server import TokenFile

    gate = transport.LspGate(TokenFile(None))

    async def scenario() -> transport.Admission:
        never = asyncio.Event()

        async def silent() -> None:
            await never.wait()

        waiting = [asyncio.create_task(gate.admit(silent, f"peer{i}")) for i in range(transport.MAX_WAITING)]
        await asyncio.sleep(0)
        assert gate.waiting == transport.MAX_WAITING
        one_more = await asyncio.wait_for(gate.admit(silent, "one more"), 1)
        for task in waiting:
            task.cancel()
        return one_more

    assert asyncio.run(scenario()) == transport.Admission(None)


def test_wrong_tokens_from_one_host_wait_longer_each_time() -> None:
    from dice_lsp.lsp import transport
    from dice_lsp.remote.server import TokenFile

    gate = transport.LspGate(TokenFile(None))
    assert [gate.backoff("10.0.0.1") for _ in range(8)] == [0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 5.0, 5.0]
    assert gate.backoff("10.0.0.2") == 0.1
