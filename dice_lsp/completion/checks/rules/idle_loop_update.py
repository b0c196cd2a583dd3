"""A `for` header's update that has no effect fails (`for (i = 0; i < n; i)`, `...; i + 1)`): the loop never moves
on by itself, and no one writes it so. (No update at all is fine: the body may move it.)"""

from __future__ import annotations

from tree_sitter import Node

from dice_lsp.completion.checks.effects import NO_EFFECT, without_effect
from dice_lsp.completion.checks.rule import construct


def loop_update_doing_nothing(expression: Node) -> bool:
    loop = expression.parent
    if loop is None or loop.type != "for_statement":
        return False
    update = loop.child_by_field_name("update")
    return update is not None and update.start_byte == expression.start_byte and (
        update.end_byte == expression.end_byte) and without_effect(expression)


# any expression may be a loop's update
RULE = construct("loop update without effect",
                 NO_EFFECT | {"assignment_expression", "comma_expression", "parenthesized_expression"},
                 loop_update_doing_nothing)
