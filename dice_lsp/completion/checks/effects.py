"""What an expression does: whether it has side effects (a call, `++`/`--`, an assignment), or none at all
(`a[i]`, `x + 1`, `x = x`). The rules on statements and loop updates that do nothing, and on operators between
an operand and itself, ask it.
"""

from __future__ import annotations

import re

from tree_sitter import Node

from dice_lsp.completion.checks.syntax import unparenthesised
from dice_lsp.cuda.names import text_of

# what a statement of one expression of these kinds does: nothing (a `<<`/`>>` may be a stream's, and is kept)
NO_EFFECT = frozenset({"identifier", "qualified_identifier", "field_expression", "subscript_expression",
                       "template_function", "binary_expression", "pointer_expression", "sizeof_expression",
                       "number_literal", "string_literal", "concatenated_string", "char_literal", "true", "false",
                       "null", "this"})
MACRO_NAME = re.compile(r"[A-Z][A-Z0-9_]*")  # an all-caps name: a macro (or a constant from a header)
_SIDE_EFFECTS = frozenset({"call_expression", "update_expression", "assignment_expression"})
_SELF_NONSENSE = frozenset({"=", "-=", "^=", "/=", "%=", "&=", "|="})  # `x op= x`: x, 0 or 1 (`+=`/`*=` mean 2x, x²)


def without_effect(expression: Node) -> bool:
    """Whether evaluating `expression` changes nothing (`a[i]`, `x + 1`, `*p`, `a, b`, `x = x`). An all-caps name
    alone is a macro that may expand to anything, and is taken to do something."""
    expression = unparenthesised(expression)
    if expression.type == "comma_expression":
        return all(without_effect(part) for part in expression.named_children)
    if expression.type == "assignment_expression":  # `x = x;`
        return assigns_itself(expression)
    if expression.type == "identifier" and MACRO_NAME.fullmatch(text_of(expression)):
        return False
    operator = expression.child_by_field_name("operator") if expression.type == "binary_expression" else None
    return expression.type in NO_EFFECT and (operator is None or operator.type not in ("<<", ">>"))


def assigns_itself(assignment: Node) -> bool:
    """`x = x`, `x = (x)`, `x -= x`, `x ^= x` anywhere (a statement, a `return`, a loop's update): it keeps x
    or sets a constant, and a user writes the constant."""
    left, right = assignment.child_by_field_name("left"), assignment.child_by_field_name("right")
    operator = assignment.child_by_field_name("operator")
    if left is None or right is None or operator is None or operator.type not in _SELF_NONSENSE or left.has_error:
        return False
    return unparenthesised(left).text == unparenthesised(right).text and not has_side_effects(left)


def has_side_effects(node: Node) -> bool:
    """A call, `++`/`--` or an assignment anywhere in `node` (`a[i++]` twice is two places)."""
    stack = [node]
    while stack:
        node = stack.pop()
        if node.type in _SIDE_EFFECTS:
            return True
        stack.extend(node.named_children)
    return False
