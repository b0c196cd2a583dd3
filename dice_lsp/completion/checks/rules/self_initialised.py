"""A variable initialised with itself fails (`int n = n * 2;`): an uninitialised read, never meant (`sizeof` or
`decltype` of it are fine, and `Config::n` names another `n`)."""

from __future__ import annotations

from tree_sitter import Node

from dice_lsp.completion.checks.rule import construct


def initialised_with_itself(declarator: Node) -> bool:
    name, value = declarator.child_by_field_name("declarator"), declarator.child_by_field_name("value")
    if name is None or value is None or name.type != "identifier":
        return False
    stack = [value]
    while stack:
        node = stack.pop()
        if node.type in ("sizeof_expression", "decltype", "lambda_expression", "qualified_identifier"):
            continue
        if node.type == "identifier" and node.text == name.text:
            return True
        stack.extend(node.named_children)
    return False


RULE = construct("initialised with itself", frozenset({"init_declarator"}), initialised_with_itself)
