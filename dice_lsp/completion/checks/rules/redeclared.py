"""A statement of the fill must not declare a name its block already declares, nor a parameter of the function
when the block is its body: `int n = ...` in a kernel that takes `n` does not compile. A loop's or a nested
block's names have scopes of their own and may shadow; the half-typed line's own declaration (`int ` typed before
a mid-line fill) is the fill's to finish.
"""

from __future__ import annotations

import re
from functools import lru_cache

from dice_lsp.completion.checks.request import Placed, Request
from dice_lsp.completion.checks.rule import Fault, Rule
from dice_lsp.completion.lexing import declared_name
from dice_lsp.cuda.functions import blank_prose
from dice_lsp.cuda.names import declared_by, text_of

BLOCK_BYTES = 20_000  # how far the text fallback looks for the braces of the hole's block


def _block(data: bytes, hole: int) -> tuple[int, int] | None:
    """The bytes between the braces of the block around `hole`, found by counting braces (None: no block, or
    one larger than `BLOCK_BYTES` either way)."""
    depth, start = 0, hole - 1
    while start >= max(0, hole - BLOCK_BYTES):
        byte = data[start]
        if byte == 0x7D:  # }
            depth += 1
        elif byte == 0x7B:  # {
            if depth == 0:
                break
            depth -= 1
        start -= 1
    else:
        return None
    depth, end = 0, hole
    while end < min(len(data), hole + BLOCK_BYTES):
        byte = data[end]
        if byte == 0x7B:
            depth += 1
        elif byte == 0x7D:
            if depth == 0:
                return start + 1, end
            depth -= 1
        end += 1
    return None


def _own_lines(data: bytes, low: int, high: int) -> list[str]:
    """The lines of data[low:high] at the block's own depth (nested blocks left out), as text."""
    kept, depth, line = [], 0, bytearray()
    for byte in data[low:high]:
        if byte == 0x7B:
            depth += 1
        elif byte == 0x7D:
            depth -= 1
        elif byte == 0x0A:
            kept.append(line.decode("utf-8", "replace"))
            line = bytearray()
        elif depth == 0:
            line.append(byte)
    kept.append(line.decode("utf-8", "replace"))
    return kept


@lru_cache(maxsize=32)
def _declared_in_block(data: bytes, hole: int, line_start: int, line_end: int) -> frozenset[str]:
    """The names the own lines of the block around the hole declare, the hole's line left out, comments and
    strings read as blank (once per request: the same for every fill)."""
    data = blank_prose(data)
    block = _block(data, hole)
    if block is None:
        return frozenset()
    low, high = block
    before = _own_lines(data, low, line_start)[:-1]  # (the last is the hole's line's own start)
    after = _own_lines(data, line_end, high)[1:]
    return frozenset(name for line in (*before, *after) if (name := declared_name(line.strip())) is not None)


def by_text(request: Request, fill: Placed) -> list[tuple[int, str]]:
    """A one-line fill that declares a name a line of its own block already declares, read from the text where
    tree-sitter cannot place the function: the block is found by counting braces, its own lines (not those of
    nested blocks, not the hole's line) are read as declarations (`lexing.declared_name`)."""
    text = fill.data.decode("utf-8", "replace")
    line_start, line_end = request.hole_line
    typed = request.data[line_start:request.hole].decode("utf-8", "replace")
    name = declared_name((typed + text).strip()) if "\n" not in text.strip() else None
    if name is None or name not in _declared_in_block(request.data, request.hole, line_start, line_end):
        return []
    at = re.search(rf"\b{re.escape(name)}\b", text)
    return [(at.start() if at else 0, name)]


def redeclared(request: Request, fill: Placed) -> list[tuple[int, str]]:
    """Names a statement of the fill declares that its block (or the function's parameters) already has, as
    (offset in the fill, name); where the function does not parse (macro-laden code), by the text (`by_text`)."""
    if request.enclosing is None:
        return by_text(request, fill)
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
