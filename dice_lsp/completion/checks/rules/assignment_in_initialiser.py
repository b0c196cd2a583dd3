"""A declaration initialised by assigning another variable fails (`int a = b = 0;`, `const int hist = histVal =
0;`): legal, and written by no one. `a = b = 0;` as a statement stays, and so does storing to memory on the way
(`T val = buffer[tid] = init;`, which real kernels do)."""

from __future__ import annotations

from tree_sitter import Node

from dice_lsp.completion.checks.rule import construct


def assigns_in_initialiser(declarator: Node) -> bool:
    value = declarator.child_by_field_name("value")
    left = value.child_by_field_name("left") if value is not None and value.type == "assignment_expression" else None
    return left is not None and left.type == "identifier"


RULE = construct("assignment in an initialiser", frozenset({"init_declarator"}), assigns_in_initialiser)
