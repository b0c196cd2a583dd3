"""A fill must not read a `__shared__` array the function has not touched yet: shared memory starts undefined, so
`out[i] = tile[threadIdx.x][threadIdx.y];` where the kernel has only declared `tile` reads garbage (the model's
neighbouring line, the store of a transpose where the tile's load belongs).

Only where the answer is certain: the array is declared in the function around the hole, the hole is in no loop
(a later iteration may read what an earlier one wrote below the hole), and nothing between the declaration and
the read mentions the array other than as a read — a store `s[i] = ...`, `&s[i]`, a reference `auto& r = s[0]`,
`s` passed or aliased whole (`load(s, ...)`, `T* p = s`) all count as writes. The fault is the read.
"""

from __future__ import annotations

from tree_sitter import Node

from dice_lsp.completion.checks.request import Placed, Request
from dice_lsp.completion.checks.rule import Fault, Rule
from dice_lsp.cuda.names import text_of

_LOOPS = frozenset({"for_statement", "for_range_loop", "while_statement", "do_statement"})


def _function_of(node: Node) -> Node | None:
    """The function definition around `node`, None when a loop comes first (or there is no function)."""
    parent = node.parent
    while parent is not None and parent.type != "function_definition":
        if parent.type in _LOOPS:
            return None
        parent = parent.parent
    return parent


def _shared_arrays(body: Node, before: int) -> dict[str, int]:
    """The `__shared__` arrays the function body declares before byte `before`: name -> where its declaration ends."""
    arrays: dict[str, int] = {}
    stack = [body]
    while stack:
        node = stack.pop()
        if node.start_byte >= before:
            continue
        if node.type == "declaration":
            if any(c.type == "type_qualifier" and c.text == b"__shared__" for c in node.children):
                for declarator in node.children_by_field_name("declarator"):
                    name: Node | None = declarator
                    while name is not None and name.type == "array_declarator":
                        name = name.child_by_field_name("declarator")
                    if declarator.type == "array_declarator" and name is not None and name.type == "identifier":
                        arrays[text_of(name)] = node.end_byte
            continue
        stack.extend(node.named_children)
    return arrays


def _reads(identifier: Node) -> bool:
    """Whether this mention of an array reads an element as a value (`s[i]`, `s[i][j].x` on the right), rather
    than writing one, taking an address or handing the array on whole."""
    node, parent = identifier, identifier.parent
    if parent is None or parent.type != "subscript_expression" or parent.child_by_field_name("argument") != node:
        return False
    while parent is not None and (
            (parent.type == "subscript_expression" and parent.child_by_field_name("argument") == node)
            or (parent.type == "field_expression" and parent.child_by_field_name("argument") == node)):
        node, parent = parent, parent.parent
    if parent is None:
        return False
    if parent.type == "update_expression" or (
            parent.type == "assignment_expression" and parent.child_by_field_name("left") == node):
        return False
    if parent.type == "init_declarator":  # `auto& r = s[0];` binds a name to the element: an alias, as `&s[0]`
        declarator = parent.child_by_field_name("declarator")
        return declarator is None or declarator.type != "reference_declarator"
    return not (parent.type == "pointer_expression" and parent.children[0].type == "&")


def _mentions(body: Node, names: set[str], low: int, high: int) -> list[Node]:
    """The identifiers among `names` in the body between bytes `low` and `high`, in the order they are written."""
    found = []
    stack = [body]
    while stack:
        node = stack.pop()
        if node.end_byte <= low or node.start_byte >= high:
            continue
        if node.type == "identifier" and text_of(node) in names:
            found.append(node)
        stack.extend(node.children)
    return sorted(found, key=lambda n: n.start_byte)


def faults(request: Request, fill: Placed) -> list[Fault]:
    if request.enclosing is None or b"__shared__" not in request.data:
        return []
    found: list[Fault] = []
    start = fill.root.descendant_for_byte_range(fill.first, fill.first)
    function = _function_of(start) if start is not None else None
    body = function.child_by_field_name("body") if function is not None else None
    if body is None:
        return []
    arrays = _shared_arrays(body, fill.first)
    if not arrays:
        return []
    first_mention: dict[str, Node] = {}
    for node in _mentions(body, set(arrays), min(arrays.values()), fill.last):
        name = text_of(node)
        if node.start_byte >= arrays[name] and name not in first_mention:
            first_mention[name] = node
    for node in first_mention.values():
        if fill.first <= node.start_byte < fill.last and _reads(node):
            found.append(Fault(fill.span(node.start_byte, node.end_byte)))
    return found


RULE = Rule("reads unwritten shared memory", "parses", faults)
