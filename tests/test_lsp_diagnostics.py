"""Background compile in the server: nvcc diagnostics on open and after typing, code lenses per kernel."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from lsprotocol import types
from pytest_lsp import LanguageClient

from .lsp_client import FAST, LOOP_HEADER, URI, diagnostics_for, open_document, ready, start, wait_status

pytestmark = pytest.mark.asyncio
CLEAN = ("__global__ void tile(float* a) {\n    __shared__ float s[256];\n    s[threadIdx.x] = a[threadIdx.x];\n"
         "    __syncthreads();\n    a[threadIdx.x] = s[255 - threadIdx.x];\n}\n")
BROKEN = "__global__ void k(float* a) {\n    a[0] = undefined_thing;\n}\n"


async def test_errors_on_open_clear_after_the_fix_and_a_clean_file_gets_its_code_lens(
        client: LanguageClient, tmp_path: Path) -> None:
    """nvcc's error on open, gone after the fix; then another file, which compiles, gets no diagnostics and one
    lens with its kernel's registers and shared memory (one server for both: each start costs a model load)."""
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



async def test_a_header_changed_outside_the_editor_recompiles_the_files_that_include_it(
        client: LanguageClient, tmp_path: Path) -> None:
    header = tmp_path / "include" / "helpers.cuh"
    header.parent.mkdir()
    header.write_text("__device__ inline float twice(float x) { return 2.0f * x; }\n")
    (tmp_path / "src").mkdir()
    main = tmp_path / "src" / "main.cu"
    main.write_text('#include "helpers.cuh"\n__global__ void k(float* a) { a[threadIdx.x] = twice(a[0]); }\n')
    (tmp_path / "compile_commands.json").write_text(json.dumps([{
        "directory": str(tmp_path), "file": "src/main.cu", "arguments": ["nvcc", "-Iinclude", "-c", "src/main.cu"]}]))
    await start(client, configuration={**FAST, "trusted": True}, workspace=tmp_path)  # its build flags apply
    open_document(client, main.read_text(), main.as_uri())
    assert list(await diagnostics_for(client, main.as_uri())) == [], "the include folder comes from the build"
    header.write_text("__device__ inline float twice(float x) { return 2.0f * y; }\n")  # e.g. a git checkout
    [error] = await asyncio.wait_for(diagnostics_for(client, main.as_uri()), timeout=60)
    assert error.range.start.line == 0 and "helpers.cuh" in error.message
    assert error.related_information and '"y"' in error.related_information[0].message


async def test_without_nvcc_one_message_and_everything_else_still_works(
        client: LanguageClient, tmp_path: Path) -> None:
    statuses = await start(client, configuration={"nvcc": str(tmp_path / "no" / "nvcc"), **FAST,
                                                  "minConfidence": 0})  # dice-tiny's checked fill, whatever its P
    for name in ("a.cu", "b.cu"):
        open_document(client, BROKEN, (tmp_path / name).as_uri())
    await ready(statuses, client)
    open_document(client, LOOP_HEADER)  # where dice-tiny writes checked code
    result = await client.text_document_inline_completion_async(types.InlineCompletionParams(
        text_document=types.TextDocumentIdentifier(uri=URI), position=types.Position(2, 29),
        context=types.InlineCompletionContext(trigger_kind=types.InlineCompletionTriggerKind.Invoked)))
    assert result is not None and result.items, "completions do not need nvcc"
    warnings = [m.message for m in client.messages if "nvcc" in m.message]
    assert len(warnings) == 1 and "nvcc not found" in warnings[0] and "diagnostics are off" in warnings[0]
    assert not client.diagnostics
