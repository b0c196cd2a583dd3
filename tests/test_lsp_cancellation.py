"""A newer request cancels the older one between denoising steps; so does $/cancelRequest."""

from __future__ import annotations

import asyncio
import re

import pytest
from lsprotocol import types
from pytest_lsp import LanguageClient

from .lsp_client import LOOP_HEADER, URI, open_document, ready, start

pytestmark = pytest.mark.asyncio
# Every canvas position its own step, 8 sampled candidates per call: seconds even on a fast CPU, long enough to
# cancel after 0.2 s (a fill of 12-32 tokens takes at most that many calls, whatever `steps` says).
SLOW = {"device": "cpu", "sampler": "low-confidence", "steps": 128, "maxCanvas": 32, "candidates": 8}


def inline_params(line: int = 1, character: int = 63) -> types.InlineCompletionParams:
    return types.InlineCompletionParams(
        text_document=types.TextDocumentIdentifier(uri=URI), position=types.Position(line, character),
        context=types.InlineCompletionContext(trigger_kind=types.InlineCompletionTriggerKind.Automatic))


def cancelled_calls(client: LanguageClient) -> list[int]:
    found = [re.search(r"cancelled after (\d+) model calls", m.message) for m in client.log_messages]
    return [int(m.group(1)) for m in found if m]


async def wait_for_cancel_log(client: LanguageClient) -> list[int]:
    async def poll() -> list[int]:
        while not cancelled_calls(client):
            await client.wait_for_notification(types.WINDOW_LOG_MESSAGE)
        return cancelled_calls(client)

    return await asyncio.wait_for(poll(), timeout=60)


async def test_a_newer_request_on_the_document_cancels_the_older(client: LanguageClient) -> None:
    statuses = await start(client, configuration=SLOW)
    await ready(statuses, client)
    open_document(client, LOOP_HEADER)  # where dice-tiny writes checked code
    first = asyncio.ensure_future(client.text_document_inline_completion_async(inline_params()))
    await asyncio.sleep(0.2)
    second = await client.text_document_inline_completion_async(inline_params())
    assert await first is None, "the older request gives up instead of answering late"
    assert second is not None and second.items
    calls = await wait_for_cancel_log(client)
    assert calls[0] < 128, "the older generation stopped before its step budget"


async def test_cancel_request_stops_the_generation(client: LanguageClient) -> None:
    statuses = await start(client, configuration=SLOW)
    await ready(statuses, client)
    open_document(client, LOOP_HEADER)  # where dice-tiny writes checked code
    request = client.protocol.send_request(types.TEXT_DOCUMENT_INLINE_COMPLETION, inline_params(), msg_id="slow-1")
    await asyncio.sleep(0.2)
    client.cancel_request(types.CancelParams(id="slow-1"))
    with pytest.raises(Exception, match=r"(?i)cancel"):
        await asyncio.wait_for(asyncio.wrap_future(request), timeout=60)
    calls = await wait_for_cancel_log(client)
    assert calls[0] < 128
