"""The "Fill hole with DICE" code action on a /*@fill*/ marker, its resolve, and the fill command."""

from __future__ import annotations

import asyncio
import re

import pytest
from lsprotocol import types
from pytest_lsp import LanguageClient

from .lsp_client import DOCUMENT_DIR, URI, open_document, ready, start

pytestmark = pytest.mark.asyncio
MARKED = ("__device__ void fill_ones(float* out, int n) {\n"  # dice-tiny fills this marker with checked code
          "    int tid = threadIdx.x;\n"
          "    for (int i = tid; i < n; /*@fill*/\n"
          "        out[i] = 1.0f;\n    }\n}\n")
MARKED_URI = (DOCUMENT_DIR / "marked.cu").as_uri()  # MARKED beside the document of URI, on the same server


def whole_file() -> types.CodeActionParams:
    return types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=URI),
        range=types.Range(types.Position(0, 0), types.Position(4, 0)),
        context=types.CodeActionContext(diagnostics=[]))


ANY_CHECKED_FILL = {"device": "cpu", "minConfidence": 0}  # dice-tiny's checked fill, whatever its P(right)


async def test_a_marker_offers_an_action_whose_resolve_fills_it_and_the_fill_command_applies_the_edit(
        client: LanguageClient) -> None:
    """(One server for both: each start costs a torch import and a model load; the resolve edits nothing, so the
    fill command meets the document as opened.)"""
    statuses = await start(client, configuration=ANY_CHECKED_FILL)
    await ready(statuses, client)
    open_document(client, MARKED)
    # a marker offers an action whose resolve fills it
    actions = await client.text_document_code_action_async(whole_file())
    titles = [a.title for a in actions or []]
    assert titles == ["Fill hole with DICE"], "a kernel that does not parse yet is not offered for optimizing"
    action = (actions or [])[0]
    assert isinstance(action, types.CodeAction) and action.edit is None, "the model runs only on resolve"
    resolved = await client.code_action_resolve_async(action)
    assert resolved.edit is not None and resolved.edit.document_changes
    change = resolved.edit.document_changes[0]
    assert isinstance(change, types.TextDocumentEdit)
    edit = change.edits[0]
    assert edit.range == types.Range(types.Position(2, 29), types.Position(2, 38)), "the marker is replaced"
    assert edit.new_text.strip()

    # the fill command applies the edit
    applied: list[types.ApplyWorkspaceEditParams] = []

    @client.feature(types.WORKSPACE_APPLY_EDIT)
    def on_apply(params: types.ApplyWorkspaceEditParams) -> types.ApplyWorkspaceEditResult:
        applied.append(params)
        return types.ApplyWorkspaceEditResult(applied=True)

    result = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="dice.fillHole", arguments=[URI, {"line": 2, "character": 29}]))
    assert result is True
    assert applied and applied[0].label == "DICE fill"


async def test_no_marker_no_fill_action_and_by_default_dice_tiny_fills_no_marker_and_says_why(
        client: LanguageClient) -> None:
    """Without a marker there is no fill action. dice-tiny's multi-line fills were right 0 of 48 times on the dev
    split: asked to fill a marker, it changes nothing and tells the user the chance and the setting that moves it.
    (One server for both, the marked file a second document beside the first: each start costs a torch import and a
    model load.)"""
    statuses = await start(client)
    await ready(statuses, client)
    open_document(client)
    actions = await client.text_document_code_action_async(whole_file()) or []
    assert [a.title for a in actions] == ["Optimize kernel `scale` with DICE"]

    open_document(client, MARKED, MARKED_URI)
    result = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="dice.fillHole", arguments=[MARKED_URI, {"line": 2, "character": 29}]))
    assert result is False

    async def told() -> str:
        while not (found := [m.message for m in client.messages if m.message.startswith("DICE: ")]):
            await asyncio.sleep(0.05)
        return found[0]

    message = await asyncio.wait_for(told(), timeout=60)
    assert re.fullmatch(r"DICE: the best candidate is likely not what you would write \(P\(right\) 0\.02 < "
                        r"0\.\d\d, dice\.minConfidence\)", message), message
