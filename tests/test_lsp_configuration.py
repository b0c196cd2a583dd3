"""One `dice.*` schema from initializationOptions and workspace/configuration; changes apply live."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from lsprotocol import types
from pytest_lsp import LanguageClient

from .lsp_client import FAST, LOOP_HEADER, URI, open_document, ready, start, wait_status

pytestmark = pytest.mark.asyncio


def inline(at: types.Position | None = None) -> types.InlineCompletionParams:
    return types.InlineCompletionParams(
        text_document=types.TextDocumentIdentifier(uri=URI), position=at or types.Position(4, 4),
        context=types.InlineCompletionContext(trigger_kind=types.InlineCompletionTriggerKind.Invoked))


async def test_a_configuration_change_applies_without_restart_and_a_bad_model_folder_reports_an_error_then_recovers(
        client: LanguageClient, native_dir: Path, tmp_path: Path) -> None:
    """(One server for both: each start costs a torch import and a model load.)"""
    # a configuration change applies without restart.
    # dice.minConfidence 0 (initializationOptions, kept under every pushed section): dice-tiny's checked fill of the
    # loop header is shown whatever its P(right), so the change of model is what the test sees
    statuses = await start(client, {"dice": {"device": "cpu", "minConfidence": 0}})
    await ready(statuses, client)
    open_document(client, LOOP_HEADER)
    at = types.Position(2, 29)
    before = await client.text_document_inline_completion_async(inline(at))
    assert before is not None and len(before.items) == 1

    pushed = {**FAST, "model": str(native_dir)}  # a random checkpoint: nothing it writes passes the checks
    seen = len(statuses)
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings={"dice": pushed}))
    await wait_status(statuses, "ready", after=seen)
    after = await client.text_document_inline_completion_async(inline(at))
    assert after is not None and list(after.items) == []

    # a bad model folder reports an error status, then recovers
    seen = len(statuses)
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings={"dice": {**FAST, "model": str(tmp_path)}}))
    error = await wait_status(statuses, "error", after=seen)
    assert "no config.json" in error["message"]
    assert await client.text_document_inline_completion_async(inline(at)) is None

    client.set_configuration(FAST, section="dice")  # the model key is gone: back to the embedded model
    seen = len(statuses)
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))
    assert (await wait_status(statuses, "ready", after=seen))["model"] == "dice-tiny"
    assert await client.text_document_inline_completion_async(inline(at)) is not None


async def test_refused_values_of_the_options_and_the_configuration_are_told_by_name_and_the_log_reaches_the_client(
        client: LanguageClient, tmp_path: Path) -> None:
    """Values the server refuses are said by name, and it still loads the model. An info line of the server's log
    (here: the workspace folder it watches) arrives as a `window/logMessage` of type Info, not on stderr, which
    an editor shows as errors (every line was an `[error]` in VS Code); the refusals are warnings, no error either.
    Neovim and Helix users configure the server through initializationOptions: a value it refuses there is shown to
    them too (window/showMessage) naming the setting, not dropped silently; the other values still apply.
    (One server for all three: each start costs a torch import and a model load. Both sources refuse a dice.steps,
    each is told: the initializationOptions' refusals first, then the configuration's.)"""
    statuses = await start(client, {"dice": {"device": "cpu", "steps": -3, "maxCanvass": 8}},
                           configuration={**FAST, "steps": 0, "sampler": "greedy"}, workspace=tmp_path)
    assert (await ready(statuses, client))["state"] == "ready"

    async def told() -> list[str]:
        while len(found := [m.message for m in client.messages if "dice." in m.message]) < 4:
            await asyncio.sleep(0.05)
        return found

    messages = await asyncio.wait_for(told(), timeout=60)
    # a bad initialization option is told by name
    initialization, configuration = messages[:2], messages[2:]
    assert any("dice.steps" in m for m in initialization), messages
    assert any("dice.maxCanvass: unknown setting" in m for m in initialization), messages
    # invalid values of the configuration are reported (and ignored: the model is ready)
    assert any("dice.steps" in m for m in configuration) and any("dice.sampler" in m for m in configuration), messages

    async def watching() -> types.LogMessageParams:
        while True:
            found = [m for m in client.log_messages if m.message == f"watching {tmp_path} and below"]
            if found:
                return found[0]
            await asyncio.sleep(0.05)

    # the log reaches the client at its level
    message = await asyncio.wait_for(watching(), timeout=60)
    assert message.type == types.MessageType.Info
    assert all(m.type != types.MessageType.Error for m in client.log_messages)
