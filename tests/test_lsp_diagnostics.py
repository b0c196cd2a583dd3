"""Background compile in the server: nvcc diagnostics on open and after typing, code lenses per kernel."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from lsprotocol import types
from pytest_lsp import LanguageClient

from .lsp_client import open_document, start, wait_status

pytestmark = pytest.mark.asyncio
CLEAN = ("__global__ void tile(float* a) {\n    __shared__ float s[256];\n    s[threadIdx.x] = a[threadIdx.x];\n"
         "    __syncthreads();\n    a[threadIdx.x] = s[255 - threadIdx.x];\n}\n")
BROKEN = "__global__ void k(float* a) {\n    a[0] = undefined_thing;\n}\n"


async def diagnostics_for(client: LanguageClient, uri: str) -> list[types.Diagnostic]:
    while uri not in client.diagnostics:
        await client.wait_for_notification(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    return client.diagnostics.pop(uri)


async def test_errors_on_open_clear_after_the_fix(client: LanguageClient, tmp_path: Path) -> None:
    await start(client)
    uri = (tmp_path / "broken.cu").as_uri()
    open_document(client, BROKEN, uri)
    [error] = await diagnostics_for(client, uri)
    assert error.source == "nvcc" and error.severity == types.DiagnosticSeverity.Error
    assert error.range == types.Range(types.Position(1, 11), types.Position(1, 26))
    assert "undefined_thing" in error.message
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
        content_changes=[types.TextDocumentContentChangeWholeDocument(text=CLEAN)]))
    assert list(await diagnostics_for(client, uri)) == []


async def test_code_lens_shows_registers_and_shared_memory(client: LanguageClient, tmp_path: Path) -> None:
    await start(client)
    uri = (tmp_path / "tile.cu").as_uri()
    open_document(client, CLEAN, uri)
    assert list(await diagnostics_for(client, uri)) == []
    lenses = await client.text_document_code_lens_async(types.CodeLensParams(
        text_document=types.TextDocumentIdentifier(uri=uri)))
    assert lenses is not None and len(lenses) == 1
    [lens] = lenses
    assert lens.range.start.line == 0 and lens.command is not None
    assert lens.command.title.startswith("regs ") and "smem 1.0 KB · spills 0" in lens.command.title


async def test_diagnostics_can_be_turned_off(client: LanguageClient, tmp_path: Path) -> None:
    statuses = await start(client, configuration={"diagnostics": False, "steps": 4})
    await wait_status(statuses, "loading")  # the settings are read before the model starts loading
    uri = (tmp_path / "off.cu").as_uri()
    open_document(client, BROKEN, uri)
    await asyncio.sleep(3)  # a compile would have published by now
    lenses = await client.text_document_code_lens_async(types.CodeLensParams(
        text_document=types.TextDocumentIdentifier(uri=uri)))
    assert not lenses and uri not in client.diagnostics

