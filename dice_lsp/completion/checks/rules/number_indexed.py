"""A number indexed by a number fails (`10[1]`): one side of `[]` must be a pointer or an array."""

from __future__ import annotations

from tree_sitter import Node

from dice_lsp.completion.checks.rule import construct


def literal_indexed(subscript: Node) -> bool:
    argument, indices = subscript.child_by_field_name("argument"), subscript.child_by_field_name("indices")
    index = indices.named_children if indices is not None else []
    return (argument is not None and argument.type == "number_literal" and len(index) == 1
            and index[0].type == "number_literal")


RULE = construct("number indexed", frozenset({"subscript_expression"}), literal_indexed)
