"""The workspace's other files as completion candidates, through a real LSP client, the real server and the
embedded model with its show filter: a trusted workspace is indexed in the background and a line of another file
whose context is the hole's is shown; an untrusted workspace's files are never read, so that line is not."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from lsprotocol import types
from pytest_lsp import LanguageClient

from .lsp_client import FAST, open_document, ready, start

pytestmark = pytest.mark.asyncio
KERNEL = ("__global__ void blend(const float* src, float* dst, float alpha, int n) {\n"
          "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
          "    if (i >= n) return;\n"
          "{hole}\n"
          "}\n")
LINE = "dst[i] = alpha * src[i] + (1.0f - alpha) * dst[i];"


def workspace(root: Path) -> str:
    """`root/blend.cu` (done) and `root/new/blend2.cu` (the same kernel, its last line still to write); the uri of
    the second."""
    (root / "blend.cu").write_text(KERNEL.replace("{hole}", f"    {LINE}"))
    (root / "new").mkdir()
    todo = root / "new" / "blend2.cu"
    todo.write_text(KERNEL.replace("{hole}", "    "))
    return todo.as_uri()


async def indexed(client: LanguageClient) -> None:
    """Wait for the server to say (in the client's log) that its background walk of the workspace is done."""
    async def poll() -> None:
        while not any("indexed for completions" in m.message for m in client.log_messages):
            await asyncio.sleep(0.05)

    await asyncio.wait_for(poll(), timeout=60)


async def complete(client: LanguageClient, uri: str) -> list[str]:
    result = await client.text_document_inline_completion_async(types.InlineCompletionParams(
        text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(3, 4),
        context=types.InlineCompletionContext(trigger_kind=types.InlineCompletionTriggerKind.Invoked)))
    assert result is None or isinstance(result, types.InlineCompletionList)
    return [str(item.insert_text) for item in result.items] if result else []


async def test_a_trusted_workspace_completes_with_its_other_files(client: LanguageClient, tmp_path: Path) -> None:
    uri = workspace(tmp_path)
    statuses = await start(client, configuration={**FAST, "trusted": True}, workspace=tmp_path)
    await ready(statuses, client)
    await indexed(client)
    open_document(client, KERNEL.replace("{hole}", "    "), uri)
    assert (await complete(client, uri))[:1] == [LINE]
    said = [m.message for m in client.log_messages if "indexed for completions" in m.message]
    assert said[0] == f"dice-lsp: 2 files of {tmp_path.name} indexed for completions (9 lines)"


async def test_an_untrusted_workspace_is_not_read(client: LanguageClient, tmp_path: Path) -> None:
    uri = workspace(tmp_path)
    statuses = await start(client, configuration=FAST, workspace=tmp_path)
    await ready(statuses, client)
    open_document(client, KERNEL.replace("{hole}", "    "), uri)
    assert LINE not in await complete(client, uri)
    assert not any("indexed for completions" in m.message for m in client.log_messages)
