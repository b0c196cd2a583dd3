"""A statement of the fill must not declare a name its block already declares, nor a parameter of the function
when the block is its body: `int n = ...` in a kernel that takes `n` does not compile. A loop's or a nested
block's names have scopes of their own and may shadow; the half-typed line's own declaration (`int ` typed before
a mid-line fill) is the fill's to finish.
"""

from __future__ import annotations

from dice_lsp.completion.checks.request import Placed, Request
from dice_lsp.completion.checks.rule import Fault, Rule
from dice_lsp.cuda.names import declared_by, text_of


def redeclared(request: Request, fill: Placed) -> list[tuple[int, str]]:
    """Names a statement of the fill declares that its block (or the function's parameters) already has, as
    (offset in the fill, name)."""
    block_names = request.scope.block_names
    if not block_names:
        return []
    found = []
    for node in fill.nodes:
        parent = node.parent
        if node.type != "declaration" or parent is None or (
                parent.type != "compound_statement" or parent.start_byte >= fill.first):
            continue  # only statements of the hole's own block
        for name in declared_by(node):  # names the fill writes (`int ` typed before a mid-line fill too)
            text = text_of(name)
            if fill.first <= name.start_byte < fill.last and text in block_names:
                found.append((fill.offset(name.start_byte), text))
    return found


def declarations(fill: Placed) -> list[tuple[int, str]]:
    """Names the fill's own statements declare in the block they are in, as (offset in the fill, name):
    `int tid = ...` gives `tid`; a loop's or a lambda's names do not count (they live in their own scope)."""
    found = []
    for node in fill.nodes:
        parent = node.parent
        if node.type != "declaration" or parent is None or parent.type != "compound_statement":
            continue
        for name in declared_by(node):
            if fill.first <= name.start_byte < fill.last:
                found.append((fill.offset(name.start_byte), text_of(name)))
    return found


def faults(request: Request, fill: Placed) -> list[Fault]:
    return [Fault((at, at + len(name)), name) for at, name in redeclared(request, fill)]


RULE = Rule("redeclared", "names", faults)
