"""One `dice.*` schema from initializationOptions and workspace/configuration; changes apply live."""

from __future__ import annotations

import pytest
from lsprotocol import types
from pytest_lsp import LanguageClient

from .lsp_client import FAST, URI, open_document, ready, start, wait_status

pytestmark = pytest.mark.asyncio


def inline() -> types.InlineCompletionParams:
    return types.InlineCompletionParams(
        text_document=types.TextDocumentIdentifier(uri=URI), position=types.Position(4, 4),
        context=types.InlineCompletionContext(trigger_kind=types.InlineCompletionTriggerKind.Invoked))


async def test_a_configuration_change_applies_without_restart(client: LanguageClient) -> None:
    statuses = await start(client)
    await ready(statuses, client)
    open_document(client)
    before = await client.text_document_inline_completion_async(inline())
    assert before is not None and len(before.items) == 1

    pushed = {**FAST, "candidates": 3, "temperature": 1.0}
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings={"dice": pushed}))
    after = await client.text_document_inline_completion_async(inline())
    assert after is not None and len(after.items) >= 2, "three sampled candidates, empty ones dropped"


async def test_a_bad_model_folder_reports_an_error_status_then_recovers(client: LanguageClient, tmp_path) -> None:
    statuses = await start(client)
    await ready(statuses, client)
    open_document(client)
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings={"dice": {**FAST, "model": str(tmp_path)}}))
    error = await wait_status(statuses, "error")
    assert "no config.json" in error["message"]
    assert await client.text_document_inline_completion_async(inline()) is None

    client.set_configuration(FAST, section="dice")  # the model key is gone: back to the embedded model
    seen = len(statuses)
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))
    assert (await wait_status(statuses, "ready", after=seen))["model"] == "dice-tiny"
    assert await client.text_document_inline_completion_async(inline()) is not None


async def test_invalid_values_are_reported_and_ignored(client: LanguageClient) -> None:
    statuses = await start(client, configuration={**FAST, "steps": 0, "sampler": "greedy"})
    assert (await ready(statuses, client))["state"] == "ready"
    warnings = [m.message for m in client.messages]
    assert any("dice.steps" in w for w in warnings) and any("dice.sampler" in w for w in warnings)
