"""Reading tree-sitter's trees of a document with a fill in it: the nodes that overlap the fill, the parse errors
(ERROR and MISSING nodes) with the statement each is in, where a base offset lands once the fill is in, and the
fill's own character offsets. Shared by the rules; none of it judges anything.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from tree_sitter import Node, Point

# nodes that hold statements or list items: what a statement is a statement *of*
LEVELS = frozenset({"compound_statement", "translation_unit", "declaration_list", "field_declaration_list",
                    "preproc_if", "preproc_ifdef", "preproc_else", "preproc_elif", "case_statement",
                    "function_definition", "enumerator_list", "initializer_list", "argument_list"})
SCALAR_TYPES = frozenset({"primitive_type", "sized_type_specifier"})  # `int`, `unsigned long`, `float` ...


@dataclass(frozen=True)
class Error:
    """An ERROR or MISSING node, as byte offsets: its own, and the statement it is in (the code a user would call
    broken)."""

    start: int
    end: int
    zone_start: int
    zone_end: int


def statement(node: Node) -> Node:
    """The statement (or other item of a block, a list or a file) that holds `node`."""
    while node.parent is not None and node.parent.type not in LEVELS:
        node = node.parent
    return node


def errors(root: Node) -> list[Error]:
    """The outermost ERROR and MISSING nodes (only subtrees that hold an error are visited)."""
    found: list[Error] = []
    stack = [root]
    while stack:
        node = stack.pop()
        if node.is_missing or node.is_error:
            held = statement(node)
            found.append(Error(node.start_byte, node.end_byte, held.start_byte, held.end_byte))
        elif node.has_error:
            stack.extend(node.children)
    return found


def inner_errors(root: Node, low: int, high: int) -> set[tuple[int, int]]:
    """The byte spans of ERROR and MISSING nodes inside another ERROR node that touch the bytes [low, high]
    (ends included, so that a zero-length MISSING node at a boundary counts). Where tree-sitter gives up on a
    large stretch of a file (heavy macros or templates can make one ERROR of a whole file), it still parses the
    code inside it; these are the errors in that code."""
    found: set[tuple[int, int]] = set()
    stack = [(root, False)]
    while stack:
        node, inside = stack.pop()
        if node.end_byte < low or node.start_byte > high or not (node.has_error or node.is_missing):
            continue
        if inside and (node.is_error or node.is_missing):
            found.add((node.start_byte, node.end_byte))
        stack.extend((child, inside or node.is_error) for child in node.children)
    return found


def overlapping(root: Node, low: int, high: int) -> Iterator[Node]:
    """Every node that overlaps the bytes [low, high) (a zero-length span: none), outermost first."""
    if high <= low:
        return
    stack = [root]
    while stack:
        node = stack.pop()
        if node.end_byte <= low or node.start_byte >= high:
            continue
        yield node
        stack.extend(reversed(node.children))


def point_after(point: Point, data: bytes) -> Point:
    """Where the text `data` ends when it starts at `point` (columns in bytes, as tree-sitter counts them)."""
    lines = data.count(b"\n")
    if lines == 0:
        return Point(point.row, point.column + len(data))
    return Point(point.row + lines, len(data) - data.rfind(b"\n") - 1)


def fill_offset(data: bytes, first: int, byte: int) -> int:
    """The character offset in the fill (its UTF-8 bytes `data`, starting at byte `first` of the new text) of
    the new text's byte `byte`, clamped to the fill."""
    return len(data[:max(0, min(len(data), byte - first))].decode("utf-8", "replace"))


def unparenthesised(node: Node) -> Node:
    """`node` without the parentheses around it (`((x))` is `x`)."""
    while node.type == "parenthesized_expression" and node.named_child_count == 1:
        node = node.named_children[0]
    return node
