"""textDocument/inlineCompletion through the real server: the region's range and text, robustness."""

from __future__ import annotations

from pathlib import Path

import pytest
from lsprotocol import types
from pytest_lsp import LanguageClient

from .lsp_client import FAST, LOOP_HEADER, URI, open_document, ready, start

pytestmark = pytest.mark.asyncio


async def test_initialize_advertises_inline_completion_and_loads_the_model(client: LanguageClient) -> None:
    statuses = await start(client)
    assert client.capabilities is not None
    status = await ready(statuses, client)
    assert statuses[0]["state"] == "loading"
    assert status["state"] == "ready" and status["model"] == "dice-tiny" and status["device"] == "cpu"


async def test_inline_completion_covers_the_region_at_the_cursor(client: LanguageClient) -> None:
    statuses = await start(client)
    await ready(statuses, client)
    open_document(client, LOOP_HEADER)
    result = await client.text_document_inline_completion_async(types.InlineCompletionParams(
        text_document=types.TextDocumentIdentifier(uri=URI), position=types.Position(1, 63),
        context=types.InlineCompletionContext(trigger_kind=types.InlineCompletionTriggerKind.Invoked)))
    assert isinstance(result, types.InlineCompletionList) and result.items
    item = result.items[0]
    assert isinstance(item.insert_text, str) and item.insert_text.strip() and "<|" not in item.insert_text
    assert item.range is not None and item.range.start == types.Position(1, 63)
    assert item.command is not None and item.command.command == "dice.completionChecks"
    assert list(item.command.arguments or []) == [{"parses": True, "names": True, "compiles": None}]


async def test_garbage_only_yields_no_item_and_the_log_says_why(client: LanguageClient, native_dir: Path) -> None:
    """A random checkpoint writes nothing that parses: the editor gets an empty list, the log the reason."""
    statuses = await start(client, configuration={**FAST, "model": str(native_dir)})
    await ready(statuses, client)
    open_document(client)
    result = await client.text_document_inline_completion_async(types.InlineCompletionParams(
        text_document=types.TextDocumentIdentifier(uri=URI), position=types.Position(4, 4),
        context=types.InlineCompletionContext(trigger_kind=types.InlineCompletionTriggerKind.Invoked)))
    assert isinstance(result, types.InlineCompletionList) and list(result.items) == []
    assert any(m.message.startswith("dice-lsp: no completion at line 5: no fill passed the checks (")
               for m in client.log_messages)


async def test_a_file_with_syntax_errors_still_completes(client: LanguageClient) -> None:
    statuses = await start(client)
    await ready(statuses, client)
    broken = "__global__ void k(float* x {\n    x[threadIdx.x] = ;\n    \n"
    open_document(client, broken)
    result = await client.text_document_inline_completion_async(types.InlineCompletionParams(
        text_document=types.TextDocumentIdentifier(uri=URI), position=types.Position(2, 4),
        context=types.InlineCompletionContext(trigger_kind=types.InlineCompletionTriggerKind.Automatic)))
    assert result is None or isinstance(result, types.InlineCompletionList)
    assert not client.error, "the server survived"
