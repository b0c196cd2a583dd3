"""The language server with `dice.server.url`: completions, repair and optimize run on a team server (a real
`dice-lsp serve` process), and a server that cannot be reached shows in `dice/status` instead of hanging."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from lsprotocol import types
from pytest_lsp import LanguageClient

from .lsp_client import (
    FAST,
    INDEX_LINE,
    TWO_KERNELS,
    URI,
    open_document,
    read_code_actions_as_vscode_does,
    start,
    wait_status,
)
from .remote_server import free_port, serving, token_file
from .test_lsp_optimize import EXAMPLE, lines, optimize, repair

pytestmark = pytest.mark.asyncio
TOKEN = "editor-secret"


@pytest.fixture(scope="module")
def team_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    tokens = token_file(tmp_path_factory.mktemp("team"), TOKEN)
    with serving("--port", "0", "--token-file", str(tokens), token=TOKEN) as (url, _):
        yield url, tokens


def remote(url: str, tokens: Path | str | None, **more: object) -> dict[str, object]:
    """What VS Code sends for the `dice` section: `dice.server.*` nested under `server` (a Path is a token
    file, a str the token itself)."""
    token = {"token": tokens} if isinstance(tokens, str) else {"tokenFile": str(tokens) if tokens else None}
    return {**FAST, "diagnostics": False, "server": {"url": url, **token}, **more}


async def inline_at(client: LanguageClient, line: int, character: int) -> types.InlineCompletionList | None:
    return await client.text_document_inline_completion_async(types.InlineCompletionParams(
        text_document=types.TextDocumentIdentifier(uri=URI), position=types.Position(line, character),
        context=types.InlineCompletionContext(trigger_kind=types.InlineCompletionTriggerKind.Invoked)))


async def test_completions_come_from_the_team_server(client: LanguageClient, team_server: tuple[str, Path]) -> None:
    statuses = await start(client, configuration=remote(team_server[0], TOKEN))
    status = await wait_status(statuses, "ready")
    assert status["server"] == team_server[0] and status["model"] == "dice-tiny"
    open_document(client, TWO_KERNELS)  # the server's pipeline is the editor's: the document's line is shown
    result = await inline_at(client, 6, 4)
    assert isinstance(result, types.InlineCompletionList) and result.items
    assert result.items[0].insert_text == INDEX_LINE
    assert result.items[0].range is not None and result.items[0].range.start == types.Position(6, 4)


async def test_an_unreachable_server_is_a_status_not_a_hang(client: LanguageClient) -> None:
    port = free_port()
    statuses = await start(client, configuration=remote(f"tcp://127.0.0.1:{port}", None))
    status = await wait_status(statuses, "error")
    assert "cannot reach the dice server" in status["message"] and status["code"] == "unreachable"
    open_document(client)
    assert await asyncio.wait_for(inline_at(client, 4, 4), timeout=60) is None


async def test_a_wrong_token_is_said_in_the_status(client: LanguageClient, team_server: tuple[str, Path],
                                                   tmp_path: Path) -> None:
    statuses = await start(client, configuration=remote(team_server[0], token_file(tmp_path, "not-it")))
    status = await wait_status(statuses, "error")
    assert "wrong token" in status["message"] and status["code"] == "unauthorized"


async def test_repair_runs_on_the_team_server(client: LanguageClient, team_server: tuple[str, Path],
                                              tmp_path: Path) -> None:
    url, tokens = team_server
    path = tmp_path / "broken.cu"
    good = EXAMPLE.read_text()
    path.write_text(good.replace("y[i] = a * x[i] + y[i];", "y[i] = a * x[i] + y[i]"))
    read_code_actions_as_vscode_does(client)
    statuses = await start(client, configuration=remote(url, tokens, repairRounds=1))
    await wait_status(statuses, "ready")
    open_document(client, path.read_text(), path.as_uri())
    line = good.splitlines().index(next(t for t in good.splitlines() if "y[i] = a * x[i] + y[i];" in t))
    diagnostic = types.Diagnostic(range=types.Range(types.Position(line + 1, 0), types.Position(line + 1, 1)),
                                  message="expected a \";\"", severity=types.DiagnosticSeverity.Error, source="nvcc")
    actions = await client.text_document_code_action_async(lines(line, line + 1, path.as_uri(), [diagnostic])) or []
    [fix] = [a for a in actions if isinstance(a, types.CodeAction) and a.title == "Repair with DICE"]
    assert fix.command is not None and fix.command.command == "dice.repair"
    result = await repair(client, path.as_uri(), False)
    assert result["repair"]["text"] == good, "the server's nvcc and model repaired it"
    [change] = result["edit"]["documentChanges"]
    assert change["textDocument"] == {"uri": path.as_uri(), "version": 1} and result["applied"] is False


@pytest.mark.slow
async def test_optimize_runs_on_the_team_server(client: LanguageClient, team_server: tuple[str, Path],
                                                tmp_path: Path) -> None:
    url, tokens = team_server
    path = tmp_path / "saxpy.cu"
    path.write_text(EXAMPLE.read_text())
    statuses = await start(client, configuration=remote(url, tokens, optimizeCandidates=4, repairRounds=1))
    await wait_status(statuses, "ready")
    open_document(client, path.read_text(), path.as_uri())
    result = await optimize(client, path.as_uri(), False)
    messages = [getattr(v, "message", "") or "" for values in client.progress_reports.values() for v in values]
    assert any("generated" in m for m in messages), "the server's progress reaches the editor"
    report = result["report"]
    assert report is not None and report["kernel"] == "saxpy" and report["generated"] == 4
    assert "saxpy" in result["summary"]
    assert report["gpu"] is False and report["unverified"] == "workspace not trusted", \
        "an untrusted workspace's rewrites are not run on the server's GPU either"



async def test_benchmarks_on_save_run_on_the_team_server(client: LanguageClient, team_server: tuple[str, Path],
                                                         tmp_path: Path) -> None:
    """The editor's machine needs no GPU: the server builds the saved file and reports (here, a server
    without a GPU says it compiled the file only)."""
    url, tokens = team_server
    path = tmp_path / "saxpy.cu"
    path.write_text(EXAMPLE.read_text())
    refreshed = asyncio.Event()

    @client.feature(types.WORKSPACE_CODE_LENS_REFRESH)
    def on_refresh(params: None) -> None:
        refreshed.set()

    statuses = await start(client, configuration=remote(url, tokens, benchOnSave=True, trusted=True))
    await wait_status(statuses, "ready")
    open_document(client, path.read_text(), path.as_uri())
    client.text_document_did_save(types.DidSaveTextDocumentParams(
        text_document=types.TextDocumentIdentifier(uri=path.as_uri())))
    await asyncio.wait_for(refreshed.wait(), timeout=240)
    lenses = await client.text_document_code_lens_async(types.CodeLensParams(
        text_document=types.TextDocumentIdentifier(uri=path.as_uri())))
    titles = [lens.command.title for lens in lenses or [] if lens.command is not None]
    if torch.cuda.is_available():
        assert any(" ms ±" in title for title in titles), titles
    else:
        assert "benchmark: no CUDA GPU here: compiled only, nothing verified or timed" in titles
    assert not [m for m in client.messages if "benchmarks on save are off" in m.message]
