"""An operator between an operand and itself fails (`tid >= tid`, `a && a`, `x - x`, `0 == 0`): a constant written
the long way. `==`/`!=` only between literals (`x != x` is how code tests for NaN); all-caps names are macros,
written so in real kernels (`NUM_GATES - NUM_GATES`); `f() - f()` may differ."""

from __future__ import annotations

from tree_sitter import Node

from dice_lsp.completion.checks.effects import MACRO_NAME, has_side_effects
from dice_lsp.completion.checks.rule import construct
from dice_lsp.completion.checks.syntax import unparenthesised
from dice_lsp.cuda.names import text_of

_SAME_OPERANDS = frozenset({"<", ">", "<=", ">=", "&&", "||", "-", "^", "/", "%"})


def same_operands(expression: Node) -> bool:
    left, right = expression.child_by_field_name("left"), expression.child_by_field_name("right")
    operator = expression.child_by_field_name("operator")
    if left is None or right is None or operator is None or left.has_error:
        return False
    left, right = unparenthesised(left), unparenthesised(right)
    if left.text != right.text:
        return False
    if operator.type in ("==", "!="):
        return left.type in ("number_literal", "char_literal", "true", "false")
    if left.type == "identifier" and MACRO_NAME.fullmatch(text_of(left)):
        return False
    return operator.type in _SAME_OPERANDS and not has_side_effects(left)


RULE = construct("same operands", frozenset({"binary_expression"}), same_operands)
