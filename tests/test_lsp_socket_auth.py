"""`dice-lsp lsp --tcp/--ws`: always a token (the operator's `--token-file`, or one made for the run in a
private file that stderr names), and beyond loopback only with `--token-file`; only the client whose
initialize carries it (or, on WebSocket, whose upgrade request has `Authorization: Bearer`) is served, and
nothing another connection sends disturbs it. A WebSocket upgrade from a browser page (an `Origin` header)
is refused unless `--allow-origin` names that origin.

Real processes and sockets; the model never loads (no `initialized` is sent).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
import stat
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from dice_lsp.lsp.transport import LspGate

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


def start(folder: Path, kind: str, *flags: str, token: bool = True) -> tuple[LspProcess, int]:
    """`dice-lsp lsp --KIND` on a free loopback port, with `--token-file` (TOKEN) unless not `token`."""
    port = free_port()
    tokens = ["--token-file", str(write_token(folder))] if token else []
    lsp = LspProcess(folder, f"--{kind}", f"127.0.0.1:{port}", *tokens, *flags)
    lsp.wait_listening()
    return lsp, port


def named_token_file(lsp: LspProcess) -> Path:
    """The token file the server's listening line names."""
    found = re.search(r"; token in (.+) \(send it as initializationOptions\.authToken", lsp.stderr())
    assert found is not None, f"no token file named: {lsp.stderr()}"
    return Path(found.group(1))


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


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


def test_without_a_token_file_the_server_makes_one_and_requires_it(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    lsp, port = start(tmp_path, "tcp", token=False)
    token_file = named_token_file(lsp)
    try:
        assert token_file.name == "token" and token_file.parent.parent == runtime
        assert (mode(token_file), mode(token_file.parent)) == (0o600, 0o700)
        assert token_file.parent.stat().st_uid == token_file.stat().st_uid == os.getuid()
        token = token_file.read_text().strip()
        assert re.fullmatch(r"[0-9a-f]{64}", token)
        assert f"language server on tcp://127.0.0.1:{port}; token in {token_file} (send it as " \
               "initializationOptions.authToken)\n" in lsp.stderr()

        assert refused(port, frame(initialize(1, **HOSTILE_OPTIONS)) + frame(HOSTILE_OPEN)) == error(
            1, REQUEST_FAILED, "unauthorized: a token is required (initializationOptions.authToken)")
        editor = SocketClient(port)
        try:
            editor.send(frame(initialize(2, token=token)))
            admitted = editor.replies.next()
            assert admitted is not None and admitted["id"] == 2 and "result" in admitted
        finally:
            editor.close()
        assert lsp.process.wait(timeout=20) == 0  # the session's end ends the server
    finally:
        lsp.close()
    assert not token_file.parent.exists(), "the token's folder outlived the server"


def test_a_made_token_lies_in_a_private_folder_that_goes_with_the_block(monkeypatch: pytest.MonkeyPatch) -> None:
    import tempfile

    from dice_lsp.lsp.transport import made_token

    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    with made_token() as path:
        assert path.parent.parent == Path(tempfile.gettempdir())
        assert (mode(path), mode(path.parent)) == (0o600, 0o700)
        assert len(path.read_text().strip()) == 64
    assert not path.parent.exists()


def test_a_socket_gate_without_a_token_file_cannot_be_made() -> None:
    from dice_lsp.lsp import transport
    from dice_lsp.remote.server import TokenFile

    with pytest.raises(ValueError, match="needs a token file"):
        transport.LspGate(TokenFile(None))


def test_one_client_is_admitted_and_other_connections_cannot_disturb_it(tmp_path: Path) -> None:
    lsp, port = start(tmp_path, "tcp")
    editor = SocketClient(port)
    try:
        editor.send(frame(initialize(1, token=TOKEN)))
        admitted = editor.replies.next()
        assert admitted is not None and admitted["id"] == 1 and admitted["result"]["serverInfo"]["name"] == "dice-lsp"

        assert refused(port, frame(initialize(7))) == error(
            7, REQUEST_FAILED, "unauthorized: a token is required (initializationOptions.authToken)")
        socket.create_connection(("127.0.0.1", port)).close()  # pygls dropped the editor for this
        assert refused(port, frame(initialize(8, token=TOKEN))) == error(
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


def test_a_websocket_upgrade_from_a_browser_page_is_refused_before_any_token(tmp_path: Path) -> None:
    from websockets.exceptions import InvalidStatus
    from websockets.sync.client import connect

    lsp, port = start(tmp_path, "ws")
    url = f"ws://127.0.0.1:{port}"
    try:
        for headers in ({}, {"Authorization": f"Bearer {TOKEN}"}):  # the right token changes nothing
            with pytest.raises(InvalidStatus) as rejected:
                connect(url, origin="https://evil.example", additional_headers=headers, open_timeout=15)
            assert rejected.value.response.status_code == 403
        refusals = [line for line in lsp.stderr().splitlines() if "WebSocket upgrade" in line]
        assert len(refusals) == 2 and all(line.endswith(": WebSocket upgrade from origin https://evil.example "
                                                        "refused (not an --allow-origin)") for line in refusals)

        with connect(url, open_timeout=15) as editor:  # no session was taken: an editor (no Origin) gets it
            editor.send(json.dumps(initialize(1, token=TOKEN)))
            assert json.loads(editor.recv(timeout=15))["result"]["serverInfo"]["name"] == "dice-lsp"
        assert f"language server on ws://127.0.0.1:{port}; token in {tmp_path / 'token'} (send it as " \
               "initializationOptions.authToken or an Authorization: Bearer header)\n" in lsp.stderr()
    finally:
        lsp.close()


def test_an_allowed_origin_is_admitted_with_the_token(tmp_path: Path) -> None:
    from websockets.exceptions import InvalidStatus
    from websockets.sync.client import connect

    lsp, port = start(tmp_path, "ws", "--allow-origin", "https://evil.example", "--allow-origin",
                      "http://localhost:8080")
    url = f"ws://127.0.0.1:{port}"
    try:
        for other in ("https://other.example", "https://evil.example:443", "http://evil.example"):
            with pytest.raises(InvalidStatus) as rejected:
                connect(url, origin=other, open_timeout=15)
            assert rejected.value.response.status_code == 403
        with connect(url, origin="https://evil.example", open_timeout=15) as page:
            page.send(json.dumps(initialize(1)))  # allowed, yet still no session without the token
            assert json.loads(page.recv(timeout=15)) == error(
                1, REQUEST_FAILED, "unauthorized: a token is required (initializationOptions.authToken)")
        with connect(url, origin="https://evil.example", open_timeout=15) as page:
            page.send(json.dumps(initialize(2, token=TOKEN)))
            assert json.loads(page.recv(timeout=15))["result"]["serverInfo"]["name"] == "dice-lsp"
    finally:
        lsp.close()


@pytest.mark.parametrize(("args", "message"), [
    (["--ws", "127.0.0.1:1", "--allow-origin", "https://evil.example/"],
     "--allow-origin 'https://evil.example/': expected scheme://host[:port], as a browser sends it "
     "(e.g. https://example.com)"),
    (["--tcp", "127.0.0.1:1", "--allow-origin", "https://evil.example"],
     "--allow-origin goes with --ws (only a WebSocket upgrade carries an Origin)"),
], ids=["not-an-origin", "not-websocket"])
def test_allow_origin_takes_origins_and_goes_with_websocket(args: list[str], message: str) -> None:
    done = run_lsp(*args)
    assert (done.returncode, done.stderr) == (2, f"dice-lsp: error: {message}\n")


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


def gate_with_token(folder: Path) -> LspGate:
    from dice_lsp.lsp.transport import LspGate
    from dice_lsp.remote.server import TokenFile

    return LspGate(TokenFile(write_token(folder)))


def test_a_silent_connection_is_closed_after_the_admission_time(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from dice_lsp.lsp import transport

    monkeypatch.setattr(transport, "ADMISSION_SECONDS", 0.2)
    gate = gate_with_token(tmp_path)

    async def silent() -> None:
        await asyncio.sleep(60)

    started = time.monotonic()
    assert asyncio.run(gate.admit(silent, "peer")) == transport.Admission(None)
    assert time.monotonic() - started < 5 and gate.waiting == 0


def test_connections_waiting_for_admission_are_bounded(tmp_path: Path) -> None:
    from dice_lsp.lsp import transport

    gate = gate_with_token(tmp_path)

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


def test_wrong_tokens_from_one_host_wait_longer_each_time(tmp_path: Path) -> None:
    gate = gate_with_token(tmp_path)
    assert [gate.backoff("10.0.0.1") for _ in range(8)] == [0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 5.0, 5.0]
    assert gate.backoff("10.0.0.2") == 0.1
