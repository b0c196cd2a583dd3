"""A loop that starts at the thread's global index and steps by one fails (`for (int i = blockIdx.x * blockDim.x +
threadIdx.x; i < n; i++)`): every thread then walks over the elements the threads after it own, each element is
done many times over and the writes race. A loop that starts there moves on by the grid (`i += blockDim.x *
gridDim.x`), or, bounded by the thread's own index (`i < first + 4`), may step by one: a bound that names
`threadIdx` or `blockIdx`, or the loop's start, is left alone."""

from __future__ import annotations

import re

from tree_sitter import Node

from dice_lsp.completion.checks.rule import construct

_THREAD = re.compile(rb"\bthreadIdx\b")
_BLOCK = re.compile(rb"\bblockIdx\b")
_BUILTINS = re.compile(rb"\b(?:threadIdx|blockIdx)\b")


def _text(node: Node | None) -> bytes:
    return node.text or b"" if node is not None else b""


def _variable(initializer: Node) -> tuple[bytes, bytes] | None:
    """(the variable a loop's initializer sets, the value it starts from): `int i = v` or `i = v`."""
    if initializer.type == "declaration":
        declarators = [c for c in initializer.children if c.type == "init_declarator"]
        if len(declarators) != 1:
            return None
        initializer = declarators[0]
        name, value = initializer.child_by_field_name("declarator"), initializer.child_by_field_name("value")
    elif initializer.type == "assignment_expression" and _text(initializer.child_by_field_name("operator")) == b"=":
        name, value = initializer.child_by_field_name("left"), initializer.child_by_field_name("right")
    else:
        return None
    if name is None or value is None or name.type != "identifier":
        return None
    return _text(name), _text(value)


def _steps_by_one(update: Node, variable: bytes) -> bool:
    """`i++`, `++i`, `i += 1`, `i = i + 1` of `variable`."""
    if update.type == "update_expression":
        argument = update.child_by_field_name("argument")
        return _text(argument) == variable and b"++" in _text(update)
    if update.type != "assignment_expression" or _text(update.child_by_field_name("left")) != variable:
        return False
    operator, right = _text(update.child_by_field_name("operator")), update.child_by_field_name("right")
    if operator == b"+=":
        return _text(right).strip() == b"1"
    return operator == b"=" and right is not None and b"".join(_text(right).split()) in (
        variable + b"+1", b"1+" + variable)


def steps_one_from_the_thread_index(update: Node) -> bool:
    loop = update.parent
    if loop is None or loop.type != "for_statement":
        return False
    mine = loop.child_by_field_name("update")
    initializer = loop.child_by_field_name("initializer")
    condition = loop.child_by_field_name("condition")
    if mine is None or mine.start_byte != update.start_byte or initializer is None:
        return False
    found = _variable(initializer)
    if found is None:
        return False
    variable, start = found
    if not (_THREAD.search(start) and _BLOCK.search(start)):
        return False
    bound = _text(condition)
    if _BUILTINS.search(bound) or (start and b"".join(start.split()) in b"".join(bound.split())):
        return False
    return _steps_by_one(update, variable)


RULE = construct("loop from the thread index by one", frozenset({"update_expression", "assignment_expression"}),
                 steps_one_from_the_thread_index)
