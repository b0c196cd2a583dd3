"""Raw LSP bytes to a real `dice-lsp lsp` process (stdio or a socket), and its replies read strictly.

The tests of framing and of socket admission speak bytes by hand: a client library would not send the
malformed headers under test, and would hide what exactly comes back.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any

REPLY_TIMEOUT_S = 15.0
STARTUP_TIMEOUT_S = 60.0


def frame(message: dict[str, Any] | bytes, length: int | None = None) -> bytes:
    """`message` as one LSP message; `length` overrides the Content-Length it announces."""
    body = message if isinstance(message, bytes) else json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n%s" % (len(body) if length is None else length, body)


def initialize(msg_id: int, token: str | None = None, **options: Any) -> dict[str, Any]:
    """An initialize request that keeps the server cheap: no `initialized` follows, so no model loads."""
    init_options: dict[str, Any] = {"dice": {"diagnostics": False, **options}}
    if token is not None:
        init_options["authToken"] = token
    return {"jsonrpc": "2.0", "id": msg_id, "method": "initialize",
            "params": {"processId": None, "rootUri": None, "capabilities": {},
                       "initializationOptions": init_options}}


def read_message(stream: IO[bytes]) -> dict[str, Any] | None:
    """One message read strictly as the spec frames it (CRLF headers, Content-Length); None at the end."""
    length = None
    while True:
        line = stream.readline()
        if not line:
            return None
        assert line.endswith(b"\r\n"), f"header line without CRLF: {line!r}"
        if line == b"\r\n":
            break
        name, _, value = line.decode().partition(":")
        if name.lower() == "content-length":
            length = int(value)
    assert length is not None, "a reply without Content-Length"
    body = stream.read(length)
    assert len(body) == length, "a reply cut short"
    message: dict[str, Any] = json.loads(body)
    return message


class Replies:
    """The responses arriving on a stream, read on a thread; `next` waits for one. The server's own requests wait
    in `requests`, its notifications are kept in `notifications`."""

    def __init__(self, stream: IO[bytes]) -> None:
        self._queue: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.requests: queue.Queue[dict[str, Any]] = queue.Queue()
        self.notifications: list[dict[str, Any]] = []
        threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream: IO[bytes]) -> None:
        try:
            while (message := read_message(stream)) is not None:
                if "method" not in message:
                    self._queue.put(message)
                elif "id" in message:
                    self.requests.put(message)
                else:
                    self.notifications.append(message)
        except (OSError, ValueError):
            pass
        self._queue.put(None)

    def next(self, timeout: float = REPLY_TIMEOUT_S) -> dict[str, Any] | None:
        """The next response; None once the stream has ended."""
        try:
            return self._queue.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no reply within {timeout} s") from None

    def request(self, method: str, timeout: float = REPLY_TIMEOUT_S) -> dict[str, Any]:
        """The server's next request of `method` (its other requests skipped)."""
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            try:
                message = self.requests.get(timeout=left)
            except queue.Empty:
                break
            if message["method"] == method:
                return message
        raise AssertionError(f"no {method} request within {timeout} s")


def lsp_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "dice_lsp.cli", "lsp", *args]


def lsp_env() -> dict[str, str]:
    return {**os.environ, "HF_HUB_OFFLINE": "1"}


class LspProcess:
    """`dice-lsp lsp ARGS` with stderr in a file (`stderr()` reads it); on stdio, `send` and `replies`."""

    def __init__(self, folder: Path, *args: str) -> None:
        self._stderr_path = folder / f"stderr-{time.monotonic_ns()}.log"
        with self._stderr_path.open("wb") as err:
            self.process = subprocess.Popen(lsp_command(*args), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                            stderr=err, env=lsp_env())
        assert self.process.stdin is not None and self.process.stdout is not None
        self.stdin = self.process.stdin
        self.replies = Replies(self.process.stdout)

    def send(self, data: bytes) -> None:
        self.stdin.write(data)
        self.stdin.flush()

    def stderr(self) -> str:
        return self._stderr_path.read_text(errors="replace")

    def wait_listening(self) -> None:
        """Until the server says it listens (it imports torch first)."""
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while "language server on " not in self.stderr():
            assert self.process.poll() is None, f"the server exited with {self.process.returncode}: {self.stderr()}"
            assert time.monotonic() < deadline, f"the server did not start listening: {self.stderr()}"
            time.sleep(0.05)

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=30)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class SocketClient:
    """A raw TCP connection speaking LSP bytes."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=REPLY_TIMEOUT_S)
        self.replies = Replies(self.sock.makefile("rb"))

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)  # the reader's file keeps the socket itself open
        self.sock.close()
