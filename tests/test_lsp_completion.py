"""textDocument/completion: the same fill as one multi-line item, for clients without inline completion."""

from __future__ import annotations

import pytest
from lsprotocol import types
from pytest_lsp import LanguageClient

from .lsp_client import INDEX_LINE, TWO_KERNELS, URI, editor_types_verdicts, open_document, ready, start

pytestmark = pytest.mark.asyncio


async def test_completion_offers_the_fill_as_an_item_with_a_text_edit(client: LanguageClient) -> None:
    statuses = await start(client)
    await ready(statuses, client)
    open_document(client, TWO_KERNELS)
    result = await client.text_document_completion_async(types.CompletionParams(
        text_document=types.TextDocumentIdentifier(uri=URI), position=types.Position(6, 4)))
    assert isinstance(result, types.CompletionList) and result.items
    item = result.items[0]
    assert isinstance(item.text_edit, types.TextEdit)
    assert item.text_edit.range.start == types.Position(6, 4) and item.text_edit.new_text == INDEX_LINE
    # clang's front end, where installed (CI has it): ✓, or "not checked" when its run outlasted the editor's budget
    marks = {True: "✓", None: "not checked"}
    assert item.detail in {f"dice-lsp: parses ✓ · names ✓ · types {marks[v]} · compiles not checked"
                           for v in editor_types_verdicts()}
    assert item.text_edit.new_text.strip() and item.label == item.text_edit.new_text.strip().splitlines()[0][:60]
