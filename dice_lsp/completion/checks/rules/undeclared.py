"""A name the code after the hole uses like a local variable (not called, not qualified, not all-caps, not a
macro's argument, not ending in `_`) that nothing in scope there provides was declared by the deleted code: the
fill must declare it (`int tid = ...` before `out[tid] = ...`). What is in scope below the hole is the symbol
table's (`HoleScope.provides`); where a half-typed line confuses tree-sitter, `typed_line.needed` says what the
deleted text declared. A name the fill passes to a macro counts as declared (the macro may declare it). What it
rejects of true lines is code after a half-typed line that still confuses tree-sitter, and names from headers
the document includes but that are not at hand. The fault is the whole fill.
"""

from __future__ import annotations

from dice_lsp.completion.checks.hole_scope import macro_argument
from dice_lsp.completion.checks.request import Placed, Request
from dice_lsp.completion.checks.rule import Fault, Rule
from dice_lsp.cuda.names import declared_by, text_of


def undeclared(request: Request, fill: Placed) -> list[str]:
    """Names the code after the hole needs declared that the fill does not declare, sorted."""
    if not request.needed:
        return []
    declared: set[str] = set()
    for node in fill.nodes:
        declared.update(text_of(name) for name in declared_by(node))
        if node.type == "identifier" and macro_argument(node):  # a macro may declare it
            declared.add(text_of(node))
    return sorted(request.needed - declared)


def faults(request: Request, fill: Placed) -> list[Fault]:
    size = len(fill.data.decode("utf-8", "replace"))
    return [Fault((0, size), name) for name in undeclared(request, fill)]


RULE = Rule("undeclared", "names", faults)
