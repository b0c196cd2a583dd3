"""An expression statement that does nothing fails (`a[i];`, `x + 1;`, `*p;`, `__syncthreads;`, `a, b;`,
`x = x;`): a compiler warns about it and no one means it. An all-caps name alone (`NO_DEVICE_CODE;`) is a macro
that may expand to a statement, `(void)x;` says on purpose that it does nothing, and a `<<` may be a stream's:
all kept."""

from __future__ import annotations

from tree_sitter import Node

from dice_lsp.completion.checks.effects import without_effect
from dice_lsp.completion.checks.rule import construct


def does_nothing(statement: Node) -> bool:
    return statement.named_child_count == 1 and without_effect(statement.named_children[0])


RULE = construct("statement without effect", frozenset({"expression_statement"}), does_nothing)
