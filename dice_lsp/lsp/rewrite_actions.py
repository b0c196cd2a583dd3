"""Code actions that rewrite code with the model: "Optimize kernel `name` with DICE" and "Repair with DICE".

Both edits are made for one version of the document and carry it (a versioned TextDocumentEdit), so an
edit computed for text the user has since changed is refused, by the server and by the client.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lsprotocol import converters, types

from dice_lsp.cuda.functions import parse_functions
from dice_lsp.textdoc import position_at

OPTIMIZE_COMMAND = "dice.optimizeKernel"
REPAIR_TITLE = "Repair with DICE"


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
    """A quick fix on nvcc's errors; the model runs when the client resolves it."""
    errors = [d for d in diagnostics if d.source == "nvcc" and d.severity == types.DiagnosticSeverity.Error]
    if not errors:
        return []
    return [types.CodeAction(title=REPAIR_TITLE, kind=types.CodeActionKind.QuickFix, diagnostics=errors,
                             data={"uri": uri, "version": version, "repair": True})]


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
