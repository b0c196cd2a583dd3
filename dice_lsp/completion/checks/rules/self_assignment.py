"""An assignment of a variable to itself fails anywhere (a statement, a `return`, a loop's update): `x = x`,
`x = (x)`, `x -= x`, `x ^= x` keep x or set a constant, and a user writes the constant (`+=` and `*=` mean 2x and
x², and stay)."""

from __future__ import annotations

from dice_lsp.completion.checks.effects import assigns_itself
from dice_lsp.completion.checks.rule import construct

RULE = construct("assigned to itself", frozenset({"assignment_expression"}), assigns_itself)
