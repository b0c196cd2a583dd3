"""An array declared with `=` and a value that is neither a braced list nor a string fails (`int w[4] = mask;`):
no compiler takes it."""

from __future__ import annotations

from tree_sitter import Node

from dice_lsp.completion.checks.rule import construct


def array_from_value(declarator: Node) -> bool:
    name, value = declarator.child_by_field_name("declarator"), declarator.child_by_field_name("value")
    return (name is not None and name.type == "array_declarator" and value is not None
            and value.type not in ("initializer_list", "string_literal", "concatenated_string", "raw_string_literal"))


RULE = construct("array from a value", frozenset({"init_declarator"}), array_from_value)
