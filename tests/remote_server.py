"""A real `dice-lsp serve` process for the team-server tests, and a raw socket to speak frames by hand."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import struct
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

STARTUP_TIMEOUT_S = 120


def wait_loaded(url: str, token: str | None) -> None:
    """Poll `status` until the model has loaded (the server listens before it has)."""
    from dice_lsp.address import parse_address
    from dice_lsp.remote.client import RemoteClient

    async def poll() -> None:
        client = RemoteClient(parse_address(url), lambda: token)
        while (await client.call("status"))["state"] == "loading":
            await asyncio.sleep(0.1)
        await client.close()

    asyncio.run(asyncio.wait_for(poll(), STARTUP_TIMEOUT_S))


@contextmanager
def serving(*args: str, token: str | None = None) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """Start `dice-lsp serve --json ARGS`, wait for its model, and yield its address (tcp://... or
    unix://...) and process."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    process = subprocess.Popen([sys.executable, "-m", "dice_lsp.cli", "serve", "--json", *args],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        if not line:  # its reason in one line (no sandbox here, say), not this helper's traceback
            pytest.fail(f"dice-lsp serve did not start: {process.communicate(timeout=30)[1].strip()}", pytrace=False)
        url = json.loads(line)["listening"]
        wait_loaded(url, token)
        yield url, process
    finally:
        process.terminate()
        process.wait(timeout=30)


async def ask(url: str, method: str, params: dict[str, Any] | None = None, token: str | None = None) -> Any:
    """One request on a fresh connection."""
    from dice_lsp.address import parse_address
    from dice_lsp.remote.client import RemoteClient

    client = RemoteClient(parse_address(url), lambda: token)
    try:
        return await client.call(method, params)
    finally:
        await client.close()


def free_port() -> int:
    """A loopback port nobody listens on (just now)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def token_file(folder: Path, token: str) -> Path:
    path = folder / "token"
    path.write_text(token + "\n")
    path.chmod(0o600)
    return path


class Raw:
    """Frames (or any bytes) by hand over a plain socket."""

    def __init__(self, url: str, timeout: float = 60.0) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port_of(url)), timeout=timeout)
        self.buffer = b""

    def send(self, message: dict[str, Any]) -> None:
        from dice_lsp.remote.protocol import encode

        self.sock.sendall(encode(message))

    def auth(self, token: str) -> dict[str, Any] | None:
        self.send({"id": 1, "method": "auth", "params": {}, "token": token})
        return self.receive()

    def receive(self) -> dict[str, Any] | None:
        """The next frame, or None when the server closed the connection."""
        import msgpack  # type: ignore[import-untyped]

        while True:
            if len(self.buffer) >= 4:
                (length,) = struct.unpack(">I", self.buffer[:4])
                if len(self.buffer) >= 4 + length:
                    body, self.buffer = self.buffer[4:4 + length], self.buffer[4 + length:]
                    return dict(msgpack.unpackb(body, raw=False))
            try:
                chunk = self.sock.recv(65536)
            except ConnectionResetError:
                return None
            if not chunk:
                return None
            self.buffer += chunk

    def close(self) -> None:
        self.sock.close()
