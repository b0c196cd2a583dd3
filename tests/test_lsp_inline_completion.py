"""textDocument/inlineCompletion through the real server: the region's range and text, robustness."""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from dice_lsp.toolchain.clang import find_clang

from .lsp_client import (
    DOCUMENT_DIR,
    FAST,
    INDEX_LINE,
    TWO_KERNELS,
    URI,
    editor_types_verdicts,
    fake_calls,
    fake_fills,
    open_document,
    ready,
    start,
)

pytestmark = pytest.mark.asyncio
SCRATCH = Path(tempfile.mkdtemp(prefix="dice-test-tmp-"))  # the server's TMPDIR: where its clang preambles go
OWN_TMP = ClientServerConfig(server_command=[sys.executable, "-m", "dice_lsp.cli"],
                             server_env={**os.environ, "HF_HUB_OFFLINE": "1", "TMPDIR": str(SCRATCH)})


TWO_KERNELS_URI = (DOCUMENT_DIR / "two_kernels.cu").as_uri()  # beside the document of URI, on the same server


@pytest_lsp.fixture(config=OWN_TMP)
async def tmp_client(lsp_client: LanguageClient) -> AsyncIterator[None]:
    """A real `dice-lsp` whose scratch files are in `SCRATCH`."""
    yield
    await lsp_client.shutdown_session()


async def test_initialize_loads_the_model_an_open_file_is_precompiled_and_inline_completion_covers_the_region(
        tmp_client: LanguageClient) -> None:
    """Initialize answers with the server's capabilities and the model loads (dice/status: loading, then ready).
    The first completion in a file should not wait for clang to read every header the file includes: the server
    starts that work when the editor opens the file. Then the product's default path (the model, the document, the
    idiom bank, the checks and the show filter): the second kernel's index line, which the first kernel has, is
    shown over the empty line. (One server for the three: each start costs a torch import and a model load.)"""
    statuses = await start(tmp_client)
    assert tmp_client.capabilities is not None
    status = await ready(statuses, tmp_client)
    assert statuses[0]["state"] == "loading"
    assert status["state"] == "ready" and status["model"] == "dice-tiny" and status["device"] == "cpu"

    # opening a file precompiles its preamble before any completion
    if find_clang() is not None:  # else no clang (apt-get install clang): nothing to precompile
        open_document(tmp_client)  # includes <cuda_runtime.h>
        for _ in range(600):
            if list(SCRATCH.glob("dice-clang-pch-*/*.pch")):
                break
            await asyncio.sleep(0.1)
        assert [p.suffix for p in SCRATCH.glob("dice-clang-pch-*/*.pch")] == [".pch"]

    # inline completion covers the region at the cursor
    open_document(tmp_client, TWO_KERNELS, TWO_KERNELS_URI)
    result = await tmp_client.text_document_inline_completion_async(types.InlineCompletionParams(
        text_document=types.TextDocumentIdentifier(uri=TWO_KERNELS_URI), position=types.Position(6, 4),
        context=types.InlineCompletionContext(trigger_kind=types.InlineCompletionTriggerKind.Invoked)))
    assert isinstance(result, types.InlineCompletionList) and result.items
    item = result.items[0]
    assert item.insert_text == INDEX_LINE
    assert item.range == types.Range(types.Position(6, 4), types.Position(6, 4))
    assert item.command is not None and item.command.command == "dice.completionChecks"
    [checks] = list(item.command.arguments or [])
    assert checks["types"] in editor_types_verdicts()
    assert checks == {"parses": True, "names": True, "types": checks["types"], "compiles": None}


async def test_garbage_only_yields_no_item_and_the_log_says_why(client: LanguageClient, native_dir: Path) -> None:
    """A random checkpoint writes nothing that parses: the editor gets an empty list, the log the reason."""
    completions: list[dict[str, Any]] = []

    @client.feature("dice/completion")
    def on_completion(params: Any) -> None:
        completions.append(params if isinstance(params, dict) else
                           {k: getattr(params, k) for k in dir(params) if not k.startswith("_")})

    statuses = await start(client, configuration={**FAST, "model": str(native_dir)})
    await ready(statuses, client)
    open_document(client)
    result = await client.text_document_inline_completion_async(types.InlineCompletionParams(
        text_document=types.TextDocumentIdentifier(uri=URI), position=types.Position(4, 4),
        context=types.InlineCompletionContext(trigger_kind=types.InlineCompletionTriggerKind.Invoked)))
    assert isinstance(result, types.InlineCompletionList) and list(result.items) == []
    assert any(m.message.startswith("dice-lsp: no completion at line 5: no fill passed the checks (")
               for m in client.log_messages)
    # and `dice/completion` says it too, for the status item's tooltip
    [told] = completions
    assert (told["uri"], told["line"], told["shown"], told["confidence"]) == (URI, 4, False, None)
    assert told["reason"].startswith("no fill passed the checks (")


BROKEN_ABOVE = (  # the first kernel does not parse; the second, with the cursor on its empty line 6, does
    "__global__ void broken(float* x {\n    x[threadIdx.x] = ;\n}\n\n"
    "__global__ void fill_ones(float* out, int n) {\n    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    \n}\n"
)


BROKEN_SIGNATURE = "__global__ void k(float* x {\n    x[threadIdx.x] = ;\n    \n"  # the cursor: line 2, character 4
SIGNATURE_URI = (DOCUMENT_DIR / "signature.cu").as_uri()


def invoked_at(line: int, character: int, uri: str = URI) -> types.InlineCompletionParams:
    return types.InlineCompletionParams(
        text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line, character),
        context=types.InlineCompletionContext(trigger_kind=types.InlineCompletionTriggerKind.Automatic))


async def test_broken_code_asks_the_model_only_where_a_region_is_left(fake_client: LanguageClient) -> None:
    """One server, two files. An unclosed parameter list leaves no function around the cursor, so no region to
    fill: the answer is an empty list at once, the model is never asked, and nothing is logged as withheld
    (nothing was). A syntax error elsewhere in a file does not stop a fill: the model's text is the item, exactly,
    over the empty line's region, with the checks it passed."""
    statuses = await start(fake_client)
    await ready(statuses, fake_client)

    fake_fills(["x[threadIdx.x] = 1.0f;"])
    open_document(fake_client, BROKEN_SIGNATURE, SIGNATURE_URI)
    result = await fake_client.text_document_inline_completion_async(invoked_at(2, 4, SIGNATURE_URI))
    assert isinstance(result, types.InlineCompletionList) and list(result.items) == []
    assert fake_calls() == [], "no region, no model call"
    assert not [m.message for m in fake_client.log_messages if "no completion" in m.message]

    fake_fills(["if (i < n) out[i] = 1.0f;"])
    open_document(fake_client, BROKEN_ABOVE)
    result = await fake_client.text_document_inline_completion_async(invoked_at(6, 4))
    assert isinstance(result, types.InlineCompletionList) and len(result.items) == 1
    [item] = result.items
    assert item.insert_text == "if (i < n) out[i] = 1.0f;"
    assert item.range == types.Range(types.Position(6, 4), types.Position(6, 4))
    assert item.command is not None and item.command.command == "dice.completionChecks"
    [checks] = list(item.command.arguments or [])
    assert checks["types"] in editor_types_verdicts()
    assert checks == {"parses": True, "names": True, "types": checks["types"], "compiles": None}
    assert fake_calls() == ["generation 1 started"]
    assert not fake_client.error, "the server survived"
