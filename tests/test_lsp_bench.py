"""Benchmarks on save (dice.benchOnSave): a code lens per kernel on a GPU machine, one message elsewhere."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest
import torch
from lsprotocol import types
from pytest_lsp import LanguageClient

from .lsp_client import FAST, open_document, ready, start

pytestmark = pytest.mark.asyncio
EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "saxpy.cu"


async def save(client: LanguageClient, path: Path) -> None:
    client.text_document_did_save(types.DidSaveTextDocumentParams(
        text_document=types.TextDocumentIdentifier(uri=path.as_uri())))


async def lens_titles(client: LanguageClient, path: Path) -> list[str]:
    lenses = await client.text_document_code_lens_async(types.CodeLensParams(
        text_document=types.TextDocumentIdentifier(uri=path.as_uri())))
    return [lens.command.title for lens in lenses or [] if lens.command is not None]


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the answer of a machine without a GPU")
async def test_without_a_gpu_saving_says_so_once(client: LanguageClient, tmp_path: Path) -> None:
    path = tmp_path / "saxpy.cu"
    shutil.copy(EXAMPLE, path)
    statuses = await start(client, configuration={"benchOnSave": True, "trusted": True, "diagnostics": False, **FAST})
    await ready(statuses, client)
    open_document(client, path.read_text(), path.as_uri())
    for _ in range(2):
        await save(client, path)

    async def told() -> None:  # however long a busy machine takes to handle the saves
        while not [m for m in client.messages if "GPU" in m.message]:
            await asyncio.sleep(0.05)

    await asyncio.wait_for(told(), timeout=60)
    await lens_titles(client, path)  # a round trip: the second save has been read too
    assert [m.message for m in client.messages if "GPU" in m.message] == [
        "dice-lsp: no CUDA GPU here; benchmarks on save are off"]


@pytest.mark.gpu
async def test_saving_shows_time_speedup_and_verdict_above_the_kernel(client: LanguageClient, tmp_path: Path) -> None:
    path = tmp_path / "saxpy.cu"
    shutil.copy(EXAMPLE, path)
    refreshed = asyncio.Event()

    @client.feature(types.WORKSPACE_CODE_LENS_REFRESH)
    def on_refresh(params: None) -> None:  # as VS Code does: ask for the lenses again
        refreshed.set()

    statuses = await start(client, configuration={"benchOnSave": True, "trusted": True, **FAST})
    await ready(statuses, client)
    open_document(client, path.read_text(), path.as_uri())
    await save(client, path)
    await asyncio.wait_for(refreshed.wait(), timeout=240)
    [title] = [t for t in await lens_titles(client, path) if " ms ±" in t]
    assert title.endswith("· verified") and "× vs ref" in title
