"""A newer request cancels the older one between denoising steps; so does $/cancelRequest.

The model is the fake one (tests/fake_model.py): its first generation makes one model call and then waits
until its request is cancelled, so each cancel provably lands in the middle of a fill; nothing here depends
on how long a fill takes.
"""

from __future__ import annotations

import asyncio
import re

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcRequestCancelled
from pytest_lsp import LanguageClient

from .lsp_client import LOOP_HEADER, URI, fake_calls, fake_fills, fake_generation_started, open_document, ready, start

pytestmark = pytest.mark.asyncio
FILL = "i += blockDim.x * gridDim.x) {"  # what the fake model writes at the loop header's cursor


def inline_params(line: int = 2, character: int = 29) -> types.InlineCompletionParams:
    return types.InlineCompletionParams(
        text_document=types.TextDocumentIdentifier(uri=URI), position=types.Position(line, character),
        context=types.InlineCompletionContext(trigger_kind=types.InlineCompletionTriggerKind.Automatic))


def cancelled_calls(client: LanguageClient) -> list[int]:
    found = [re.search(r"cancelled after (\d+) model calls", m.message) for m in client.log_messages]
    return [int(m.group(1)) for m in found if m]


async def wait_for_cancel_log(client: LanguageClient, after: int = 0) -> list[int]:
    """The model calls each cancelled fill got to, as the log says, past the first `after` (once there is one)."""
    async def poll() -> list[int]:
        while not cancelled_calls(client)[after:]:
            await client.wait_for_notification(types.WINDOW_LOG_MESSAGE)
        return cancelled_calls(client)[after:]

    return await asyncio.wait_for(poll(), timeout=60)


async def started_with_a_held_fill(client: LanguageClient) -> None:
    fake_fills([FILL], hold=1)
    statuses = await start(client)
    await ready(statuses, client)
    open_document(client, LOOP_HEADER)


async def test_a_newer_request_on_the_document_cancels_the_older_and_cancel_request_stops_the_generation(
        fake_client: LanguageClient) -> None:
    """(One server for both, one held fill after the other: each start costs a torch import and a model load.)"""
    await started_with_a_held_fill(fake_client)
    # a newer request on the document cancels the older
    first = asyncio.ensure_future(fake_client.text_document_inline_completion_async(inline_params()))
    await fake_generation_started(1)  # the first fill is under way, and stays so until cancelled
    second = await fake_client.text_document_inline_completion_async(inline_params())
    assert await first is None, "the older request gives up instead of answering late"
    assert isinstance(second, types.InlineCompletionList) and [i.insert_text for i in second.items] == [FILL]
    assert second.items[0].range == types.Range(types.Position(2, 29), types.Position(2, 29))
    assert await wait_for_cancel_log(fake_client) == [1], "the older fill stopped after its one model call"
    assert fake_calls() == ["generation 1 started", "generation 2 started"]

    # $/cancelRequest stops the generation: the third generation is held in its turn
    fake_fills([FILL], hold=3)
    request = fake_client.protocol.send_request(types.TEXT_DOCUMENT_INLINE_COMPLETION, inline_params(),
                                                msg_id="slow-1")
    await fake_generation_started(3)
    fake_client.cancel_request(types.CancelParams(id="slow-1"))
    with pytest.raises(JsonRpcRequestCancelled):
        await asyncio.wait_for(asyncio.wrap_future(request), timeout=60)
    assert await wait_for_cancel_log(fake_client, after=1) == [1]
    assert fake_calls() == ["generation 1 started", "generation 2 started", "generation 3 started"], \
        "nothing was filled after the cancel"
