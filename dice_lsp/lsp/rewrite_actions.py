"""Code actions that rewrite code with the model: "Optimize kernel `name` with DICE" and "Repair with DICE".

Both are commands, not edits: the model runs when the user picks the action, and its rewrite is shown to
the user (a question with Apply / Discard, or the client's own preview) before anything is applied. Both
edits are made for one version of the document and carry it (a versioned TextDocumentEdit), so an edit
computed for text the user has since changed is refused, by the server and by the client.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from typing import Any

from lsprotocol import converters, types

from dice_lsp.cuda.functions import parse_functions
from dice_lsp.textdoc import position_at
from dice_lsp.wording import counted

OPTIMIZE_COMMAND = "dice.optimizeKernel"
REPAIR_COMMAND = "dice.repair"
REPAIR_TITLE = "Repair with DICE"
DIFF_LINES = 12  # a question shows at most this many lines of a diff: it is a message, not an editor


def optimize_actions(uri: str, text: str, version: int | None, first: int, last: int) -> list[types.CodeAction]:
    """One action per kernel whose definition touches lines first..last (the cursor or the selection)."""
    actions = []
    for kernel in parse_functions(text):
        if not kernel.is_kernel:
            continue
        top, bottom = text.count("\n", 0, kernel.head), text.count("\n", 0, kernel.body_close)
        if top <= last and first <= bottom:
            title = f"Optimize kernel `{kernel.name}` with DICE"
            actions.append(types.CodeAction(title=title, kind=types.CodeActionKind.RefactorRewrite,
                                            command=types.Command(title, OPTIMIZE_COMMAND,
                                                                  arguments=[uri, kernel.name, version])))
    return actions


def repair_actions(uri: str, version: int | None, diagnostics: Sequence[types.Diagnostic]) -> list[types.CodeAction]:
    """A quick fix on nvcc's errors. It carries the command `dice.repair(uri, version)`, never an edit: a client
    applies a quick fix's edit as soon as it is picked, and a repair must be seen before it is applied."""
    errors = [d for d in diagnostics if d.source == "nvcc" and d.severity == types.DiagnosticSeverity.Error]
    if not errors:
        return []
    return [types.CodeAction(title=REPAIR_TITLE, kind=types.CodeActionKind.QuickFix, diagnostics=errors,
                             command=types.Command(REPAIR_TITLE, REPAIR_COMMAND, arguments=[uri, version]))]


def compact_diff(before: str, after: str) -> str:
    """The lines `after` changes in `before`, as unified-diff hunks without context lines or file names (what a
    question to the user can show), cut after `DIFF_LINES` lines with a count of the rest."""
    lines = list(difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0))[2:]
    if len(lines) > DIFF_LINES:
        lines = [*lines[:DIFF_LINES], f"… {counted(len(lines) - DIFF_LINES, 'more line')}"]
    return "\n".join(lines)


def whole_document_edit(uri: str, version: int | None, before: str, after: str) -> types.WorkspaceEdit:
    """Replace the changed middle of the document (what differs between `before` and `after`)."""
    start = 0
    while start < min(len(before), len(after)) and before[start] == after[start]:
        start += 1
    end_before, end_after = len(before), len(after)
    while end_before > start and end_after > start and before[end_before - 1] == after[end_after - 1]:
        end_before, end_after = end_before - 1, end_after - 1
    lo, hi = position_at(before, start), position_at(before, end_before)
    edit = types.TextEdit(types.Range(types.Position(lo.line, lo.character), types.Position(hi.line, hi.character)),
                          after[start:end_after])
    return types.WorkspaceEdit(document_changes=[types.TextDocumentEdit(
        text_document=types.OptionalVersionedTextDocumentIdentifier(uri=uri, version=version), edits=[edit])])


def edit_json(edit: types.WorkspaceEdit | None) -> Any:
    """The edit as the command's result carries it (for clients that preview it before applying)."""
    return None if edit is None else converters.get_converter().unstructure(edit)
