"""`++`/`--` applied to a value fails (`++i++`, `5++`): only a variable can be incremented."""

from __future__ import annotations

from tree_sitter import Node

from dice_lsp.completion.checks.rule import construct


def updates_a_value(update: Node) -> bool:
    argument = update.child_by_field_name("argument")
    return argument is not None and (argument.type in ("number_literal", "string_literal") or (
        argument.type == "update_expression" and argument.children[-1].type in ("++", "--")))


RULE = construct("update of a value", frozenset({"update_expression"}), updates_a_value)
