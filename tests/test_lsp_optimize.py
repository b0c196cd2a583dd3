"""The "Optimize kernel with DICE" code action and the "Repair with DICE" quick fix, and their commands, through a
real LSP client, the real server, the embedded model and the real nvcc (no GPU here: rewrites are ranked
by nvcc's resource report and said to be unverified)."""

from __future__ import annotations

import asyncio
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from lsprotocol import types
from pygls.exceptions import JsonRpcRequestCancelled
from pytest_lsp import LanguageClient

from .lsp_client import (
    FAST,
    diagnostics_for,
    fake_calls,
    fake_fills,
    fake_gpu,
    open_document,
    read_code_actions_as_vscode_does,
    ready,
    start,
)
from .test_cli_optimize import FMAF, GRID_STRIDE, RETURNS, UNDECLARED

pytestmark = pytest.mark.asyncio
EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "saxpy.cu"
QUICK = {**FAST, "optimizeCandidates": 4, "repairRounds": 1, "diagnostics": False, "trusted": True}


def lines(first: int, last: int, uri: str, diagnostics: list[types.Diagnostic] | None = None) -> types.CodeActionParams:
    return types.CodeActionParams(text_document=types.TextDocumentIdentifier(uri=uri),
                                  range=types.Range(types.Position(first, 0), types.Position(last, 0)),
                                  context=types.CodeActionContext(diagnostics=diagnostics or []))


async def opened(client: LanguageClient, tmp_path: Path, configuration: dict[str, Any]) -> tuple[Path, str]:
    path = tmp_path / "saxpy.cu"
    shutil.copy(EXAMPLE, path)
    read_code_actions_as_vscode_does(client)
    statuses = await start(client, configuration=configuration)
    await ready(statuses, client)
    open_document(client, path.read_text(), path.as_uri())
    return path, path.as_uri()


async def optimize(client: LanguageClient, uri: str, *ask: bool) -> Any:
    """Run the command the "Optimize kernel `saxpy`" action carries, offered for version 1."""
    return await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="dice.optimizeKernel", arguments=[uri, "saxpy", 1, *ask]))


def user_says_apply(client: LanguageClient, meanwhile: Callable[[types.ShowMessageRequestParams], None],
                    ) -> list[types.ApplyWorkspaceEditParams]:
    """Answer the summary with Apply (after `meanwhile`) and accept edits; returns the edits applied."""
    applied: list[types.ApplyWorkspaceEditParams] = []

    @client.feature(types.WINDOW_SHOW_MESSAGE_REQUEST)
    def on_question(params: types.ShowMessageRequestParams) -> types.MessageActionItem:
        meanwhile(params)
        return types.MessageActionItem("Apply")

    @client.feature(types.WORKSPACE_APPLY_EDIT)
    def on_apply(params: types.ApplyWorkspaceEditParams) -> types.ApplyWorkspaceEditResult:
        applied.append(params)
        return types.ApplyWorkspaceEditResult(applied=True)

    return applied


# The fake model's four rewrites (tests/test_cli_optimize.py): the best, the signature's fmaf, changes one call.
FAKE_REWRITES = [GRID_STRIDE, UNDECLARED, RETURNS, FMAF]
FAKE_QUICK = {**QUICK, "repairRounds": 0}
FMAF_EDIT = types.TextEdit(range=types.Range(types.Position(17, 22), types.Position(17, 37)),
                           new_text="fmaf(a, x[i], y[i])")


VERIFIED = {"fmaf(a, x[i], y[i])": 1.5}  # the fake harness verifies the signature's fmaf rewrite, 1.5x faster


@pytest.fixture
def fake_harness() -> Any:
    """The fake server optimizes as on a GPU that verifies only the fmaf rewrite (tests/fake_model.py)."""
    fake_gpu(VERIFIED)
    yield
    fake_gpu(None)


def fake_summary(report: dict[str, Any]) -> str:
    return ("saxpy: 1.50× faster (1.0000 ms → 0.6667 ms, verified; signature); 4 distinct candidates of 4, "
            "3 compiled, 1 verified, 1 faster, 1 doing less work than the original (never offered unverified)")


async def test_optimize_reports_progress_applies_only_what_the_user_accepts_never_unverified_nor_to_a_changed_document(
        fake_client: LanguageClient, tmp_path: Path, fake_harness: None) -> None:
    """With a (fake) GPU: progress, the ranked report, the question, and the edit applied only when the user accepts.
    The same four rewrites on a machine without a GPU: ranked and reported, none offered (no question, no edit), the
    user told why and where the top draft can be read. An edit for a document that changed meanwhile is refused.
    (One server for the three, the second on a copy of the file: each start costs a torch import and a model load;
    each optimize takes four of the fake model's texts, so each starts again at the first rewrite.)"""
    client = fake_client
    fake_fills(FAKE_REWRITES)
    path, uri = await opened(client, tmp_path, FAKE_QUICK)
    original = path.read_text()
    asked: list[str] = []
    meanwhile: list[Callable[[types.ShowMessageRequestParams], None]] = [
        lambda question: asked.append(question.message)]
    applied = user_says_apply(client, lambda question: meanwhile[0](question))
    result = await optimize(client, uri)
    [(begin, *reports, end)] = [v for v in client.progress_reports.values()
                                if isinstance(v[0], types.WorkDoneProgressBegin) and v[0].title == "DICE optimize"]
    assert (begin.message, begin.cancellable, getattr(end, "message", None)) == ("saxpy.cu", True, "done")
    assert [re.sub(r"compiled \d+/", "compiled ?/", r.message or "") for r in reports] == [
        "generated 4 candidates, 4 distinct", "compiled ?/1 of 4", "compiled ?/2 of 4", "compiled ?/3 of 4",
        "compiled ?/4 of 4",  # compiles run side by side: which of them is done first varies
        "verified and timed 1/3: 0 verified", "verified and timed 2/3: 0 verified",
        "verified and timed 3/3: 1 verified"]  # one at a time, on the (fake) GPU
    assert reports[4].message == "compiled 3/4 of 4"
    report = result["report"]
    assert [(c["rank"], c["origin"], c["compiled"], c["less_work"] is not None) for c in report["candidates"]] == [
        (1, "signature", True, False), (2, "re-noise 30%", True, False), (3, "re-noise 60%", False, False),
        (4, "re-noise 100%", True, True)]
    assert (report["gpu"], report["verified"], result["summary"]) == (True, 1, fake_summary(report))
    assert asked == ["DICE: " + fake_summary(report)]
    [params] = applied
    assert params.label == "DICE: optimize saxpy"
    [change] = params.edit.document_changes
    assert (change.text_document.uri, change.text_document.version, list(change.edits)) == (uri, 1, [FMAF_EDIT])
    assert result["applied"] is True
    assert path.read_text() == original, "the server never writes the file itself"
    asked.clear()
    unasked = await optimize(client, uri, False)  # a client that previews the edit itself (VS Code's)
    assert not asked and unasked["applied"] is False and unasked["edit"] == result["edit"]
    assert fake_calls() == [f"generation {n} started" for n in range(1, 9)], "four model calls per optimize"

    if not torch.cuda.is_available():  # (checks the answer of a machine without a GPU: unverified)
        # without a GPU nothing unverified is offered as an edit
        fake_gpu(None)
        copy = tmp_path / "copy" / "saxpy.cu"
        copy.parent.mkdir()
        shutil.copy(EXAMPLE, copy)
        open_document(client, copy.read_text(), copy.as_uri())
        asked.clear()
        applied.clear()
        told_before = len(client.messages)
        result = await optimize(client, copy.as_uri())
        report = result["report"]
        assert (report["gpu"], report["best"], result["edit"], result["applied"], asked, applied) == (
            False, None, None, False, [], [])
        assert report["draft"]["origin"] == "signature" and "fmaf(a, x[i], y[i])" in report["draft"]["diff"]
        assert result["summary"].startswith("saxpy: nothing to apply: no rewrite could be verified (a GPU verifies")
        told = [m.message for m in client.messages[told_before:] if m.message.startswith("DICE: saxpy:")]
        assert told == [f"DICE: {result['summary']}"]
        fake_gpu(VERIFIED)

    # an edit for a changed document is refused
    def type_meanwhile(_question: types.ShowMessageRequestParams) -> None:
        client.text_document_did_change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text=path.read_text() + "\n// more\n")]))

    meanwhile[0] = type_meanwhile
    applied.clear()
    result = await optimize(client, uri)
    assert not applied and result["applied"] is False
    assert result["summary"] == "not applied: the document changed while the kernel was being optimized"
    stale = await optimize(client, uri)
    assert stale["report"] is None and "changed since" in stale["summary"], "an action offered for version 1"


def optimize_progress(client: LanguageClient, before: int = 0) -> list[Any]:
    """The reports of the `before`-th "DICE optimize" progress (0: the first) the client has seen, or []."""
    begun = [values for values in list(client.progress_reports.values()) if values
             and isinstance(values[0], types.WorkDoneProgressBegin) and values[0].title == "DICE optimize"]
    return begun[before] if len(begun) > before else []


async def test_each_kernel_gets_an_optimize_action_and_cancelling_its_progress_or_its_request_stops_it(
        client: LanguageClient, tmp_path: Path) -> None:
    """Each kernel under the cursor gets an optimize action. Cancelling the progress stops the optimization.
    `$/cancelRequest` on the command: the job stops (its progress ends "cancelled"), the request is answered with
    RequestCancelled, and nothing says it was cancelled nor offers a rewrite afterwards. (One server for the three,
    one optimization after the other: each start costs a torch import and a model load.)"""
    _, uri = await opened(client, tmp_path, {**QUICK, "optimizeCandidates": 12, "repairRounds": 3})
    # each kernel under the cursor gets an optimize action
    on_saxpy = await client.text_document_code_action_async(lines(16, 16, uri)) or []
    assert [(a.title, a.kind) for a in on_saxpy if isinstance(a, types.CodeAction)] == [
        ("Optimize kernel `saxpy` with DICE", types.CodeActionKind.RefactorRewrite)]
    assert not await client.text_document_code_action_async(lines(3, 3, uri)), "the launch spec is no kernel"
    both = await client.text_document_code_action_async(lines(0, 45, uri)) or []
    assert [a.title for a in both] == ["Optimize kernel `saxpy` with DICE", "Optimize kernel `saxpy_vec4` with DICE"]

    # cancelling the progress stops the optimization
    async def cancel_when_it_begins() -> None:
        while True:
            for token, values in list(client.progress_reports.items()):
                begin = values[0] if values else None
                if isinstance(begin, types.WorkDoneProgressBegin) and begin.title == "DICE optimize":
                    assert begin.cancellable
                    client.window_work_done_progress_cancel(types.WorkDoneProgressCancelParams(token=token))
                    return
            await asyncio.sleep(0.05)

    canceller = asyncio.create_task(cancel_when_it_begins())
    result = await asyncio.wait_for(optimize(client, uri), timeout=120)
    await canceller
    assert result["summary"] == "optimize cancelled" and result["report"] is None

    # cancelling the optimize request stops it and answers RequestCancelled
    told_before = len(client.messages)  # the first one's "optimize cancelled" is told before its answer came
    asked = user_says_apply(client, lambda _question: None)
    request = client.protocol.send_request(types.WORKSPACE_EXECUTE_COMMAND, types.ExecuteCommandParams(
        command="dice.optimizeKernel", arguments=[uri, "saxpy", 1]), msg_id="optimize-1")

    def progress() -> list[Any]:
        return optimize_progress(client, 1)  # the second optimization's

    async def until(found: Callable[[], bool]) -> None:
        while not found():
            await asyncio.sleep(0.05)

    await asyncio.wait_for(until(lambda: bool(progress())), timeout=120)
    client.cancel_request(types.CancelParams(id="optimize-1"))
    with pytest.raises(JsonRpcRequestCancelled):
        await asyncio.wait_for(asyncio.wrap_future(request), timeout=120)
    await asyncio.wait_for(until(lambda: isinstance(progress()[-1], types.WorkDoneProgressEnd)), timeout=120)
    assert progress()[-1].message == "cancelled", "the optimization itself stopped, not only its answer"
    assert not asked and not [m.message for m in client.messages[told_before:]
                              if "saxpy" in m.message or "cancelled" in m.message]


BROKEN_LINE = "    if (i < n) y[i] = a * x[i] + y[i]"  # line 18 of examples/saxpy.cu, its ';' gone
REPAIR_QUESTION = ("DICE: repaired: line 18: `if (i < n) y[i] = a * x[i] + y[i]` -> "
                   "`if (i < n) y[i] = a * x[i] + y[i];` (for: expected a \";\")\n"
                   f"@@ -18 +18 @@\n-{BROKEN_LINE}\n+{BROKEN_LINE};")


async def broken_opened(client: LanguageClient, tmp_path: Path) -> tuple[Path, list[types.Diagnostic]]:
    """examples/saxpy.cu without one ';', open at version 1, and nvcc's diagnostics on it."""
    path = tmp_path / "broken.cu"
    path.write_text(EXAMPLE.read_text().replace(f"{BROKEN_LINE};", BROKEN_LINE))
    read_code_actions_as_vscode_does(client)
    statuses = await start(client, configuration={**QUICK, "diagnostics": True})
    await ready(statuses, client)
    open_document(client, path.read_text(), path.as_uri())
    diagnostics = await asyncio.wait_for(diagnostics_for(client, path.as_uri()), timeout=60)
    assert diagnostics and diagnostics[0].source == "nvcc"
    return path, diagnostics


async def repair(client: LanguageClient, uri: str, *ask: bool) -> Any:
    """Run the command the "Repair with DICE" quick fix carries, offered for version 1."""
    return await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="dice.repair", arguments=[uri, 1, *ask]))


def edited(text: str, edit: types.TextEdit) -> str:
    """`text` with `edit` made."""
    lines_of = text.splitlines(keepends=True)
    lo = sum(len(line) for line in lines_of[:edit.range.start.line]) + edit.range.start.character
    hi = sum(len(line) for line in lines_of[:edit.range.end.line]) + edit.range.end.character
    return text[:lo] + edit.new_text + text[hi:]


async def test_repair_is_shown_and_applied_only_when_the_user_says_apply(client: LanguageClient,
                                                                        tmp_path: Path) -> None:
    """The quick fix carries a command, never an edit (a client applies a quick fix's edit as soon as it is
    picked). The command repairs with progress, then asks with the change and its diff: Discard, or no answer,
    applies nothing; Apply applies the versioned edit; Apply after the document changed is refused. With `ask`
    false (VS Code's extension shows a diff and asks itself) it asks nothing and returns the edit unapplied."""
    path, diagnostics = await broken_opened(client, tmp_path)
    uri, text = path.as_uri(), path.read_text()
    first = diagnostics[0].range.start.line
    actions = await client.text_document_code_action_async(lines(first, first, uri, diagnostics)) or []
    [fix] = [a for a in actions if a.title == "Repair with DICE"]
    assert isinstance(fix, types.CodeAction) and fix.kind == types.CodeActionKind.QuickFix and fix.edit is None
    assert fix.command is not None and (fix.command.command, fix.command.arguments) == ("dice.repair", (uri, 1))
    assert (await client.code_action_resolve_async(fix)).edit is None, "resolving it repairs nothing"

    def type_meanwhile() -> str:
        client.text_document_did_change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text=text + "\n// more\n")]))
        return "Apply"

    answers: list[Callable[[], str | None]] = [lambda: "Discard", lambda: None, lambda: "Apply", type_meanwhile]
    asked: list[str] = []
    applied: list[types.ApplyWorkspaceEditParams] = []

    @client.feature(types.WINDOW_SHOW_MESSAGE_REQUEST)
    def on_question(params: types.ShowMessageRequestParams) -> types.MessageActionItem | None:
        asked.append(params.message)
        assert [a.title for a in params.actions or []] == ["Apply", "Discard"]
        title = answers.pop(0)()
        return None if title is None else types.MessageActionItem(title)

    @client.feature(types.WORKSPACE_APPLY_EDIT)
    def on_apply(params: types.ApplyWorkspaceEditParams) -> types.ApplyWorkspaceEditResult:
        applied.append(params)
        return types.ApplyWorkspaceEditResult(applied=True)

    previewed = await repair(client, uri, False)
    [(begin, *_, end)] = [v for v in client.progress_reports.values()
                          if isinstance(v[0], types.WorkDoneProgressBegin) and v[0].title == "DICE repair"]
    assert (begin.message, begin.cancellable, getattr(end, "message", None)) == ("broken.cu", True, "done")
    assert (asked, applied, previewed["applied"]) == ([], [], False)
    assert previewed["summary"] == REPAIR_QUESTION.split("\n")[0].removeprefix("DICE: ")
    assert previewed["repair"]["compiles"] is True and previewed["repair"]["text"] == EXAMPLE.read_text()
    discarded = await repair(client, uri)
    assert (asked, applied, discarded["applied"]) == ([REPAIR_QUESTION], [], False)
    unanswered = await repair(client, uri)
    assert (len(asked), applied, unanswered["applied"]) == (2, [], False)
    accepted = await repair(client, uri)
    [params] = applied
    assert params.label == "DICE: repair" and accepted["applied"] is True
    [change] = params.edit.document_changes or []
    assert isinstance(change, types.TextDocumentEdit) and change.text_document.version == 1
    [edit] = change.edits
    assert isinstance(edit, types.TextEdit) and edited(text, edit) == EXAMPLE.read_text(), \
        "the missing ';' is put back, nothing else changes"
    assert accepted["edit"] == previewed["edit"], "the edit previewed is the edit applied"
    stale = await repair(client, uri)
    assert (len(asked), len(applied), stale["applied"]) == (4, 1, False)
    assert stale["summary"] == "not applied: the document changed while the repair was shown; run it again"
    assert [m.message for m in client.messages if "not applied" in m.message] == [f"dice-lsp: {stale['summary']}"]
    assert path.read_text() == text, "the server never writes the file itself"

