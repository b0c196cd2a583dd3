"""`dice-lsp lsp --tcp` and `--ws`: the same server over sockets on loopback, for the client holding its token."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types
from pygls.lsp.client import LanguageClient

from .lsp_client import FAST, LOOP_HEADER

pytestmark = pytest.mark.asyncio
TOKEN = "5f0c9e2a-transport-test-token"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(params=["tcp", "ws"])
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, int]]:
    """`dice-lsp lsp --tcp/--ws` on a free loopback port, whose clients must send TOKEN."""
    port = free_port()
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(0o600)
    proc = subprocess.Popen([sys.executable, "-m", "dice_lsp.cli", "lsp", f"--{request.param}", f"127.0.0.1:{port}",
                             "--token-file", str(token_file)],
                            env={**os.environ, "HF_HUB_OFFLINE": "1"}, stderr=subprocess.DEVNULL)
    try:
        yield request.param, port
    finally:
        proc.kill()
        proc.wait(timeout=30)


async def connect(kind: str, port: int) -> LanguageClient:
    for _ in range(200):  # the server needs a few seconds to import torch and listen
        client = LanguageClient("transport-test", "1")
        try:
            await (client.start_tcp if kind == "tcp" else client.start_ws)("127.0.0.1", port)
            return client
        except OSError:
            await asyncio.sleep(0.1)
    raise AssertionError(f"nothing listens on {kind} port {port}")


async def test_a_socket_client_gets_a_completion(server: tuple[str, int]) -> None:
    client = await connect(*server)
    ready = asyncio.Event()

    @client.feature("dice/status")
    def status(params: Any) -> None:
        if getattr(params, "state", None) == "ready":
            ready.set()

    await client.initialize_async(types.InitializeParams(capabilities=types.ClientCapabilities(),
                                                         initialization_options={"dice": {**FAST, "minConfidence": 0},
                                                                                 "authToken": TOKEN}))
    client.initialized(types.InitializedParams())
    await asyncio.wait_for(ready.wait(), timeout=120)
    uri = "file:///socket/kernel.cu"
    client.text_document_did_open(types.DidOpenTextDocumentParams(
        types.TextDocumentItem(uri=uri, language_id="cuda-cpp", version=1, text=LOOP_HEADER)))
    result = await client.text_document_inline_completion_async(types.InlineCompletionParams(
        text_document=types.TextDocumentIdentifier(uri), position=types.Position(2, 29),
        context=types.InlineCompletionContext(types.InlineCompletionTriggerKind.Invoked)))
    assert result is not None and result.items and result.items[0].range.start == types.Position(2, 29)
    await client.shutdown_async(None)
