"""An `if` whose body is an empty statement and that has no `else` fails (`if (n == 0);`): what follows runs
either way, and the compiler warns that the body is empty. (A loop with an empty body may spin on purpose, and an
empty block `{}` is where the user writes next: both stay.)"""

from __future__ import annotations

from tree_sitter import Node

from dice_lsp.completion.checks.rule import construct


def if_doing_nothing(statement: Node) -> bool:
    body = statement.child_by_field_name("consequence")
    return (body is not None and body.type == "expression_statement" and body.named_child_count == 0
            and statement.child_by_field_name("alternative") is None)


RULE = construct("empty if", frozenset({"if_statement"}), if_doing_nothing)
