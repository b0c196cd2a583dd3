"""A type written as a statement of its own fails (`typename OffsetT;`, `int;`): it declares nothing."""

from __future__ import annotations

from tree_sitter import Node

from dice_lsp.completion.checks.rule import construct


def type_alone(node: Node) -> bool:
    return node.parent is not None and node.parent.type == "compound_statement"


RULE = construct("type alone", frozenset({"primitive_type", "dependent_type"}), type_alone)
