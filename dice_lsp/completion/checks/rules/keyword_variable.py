"""A declaration that names a value keyword as its variable fails (`gflags false;`, which tree-sitter reads as a
variable `false` of type `gflags`): no compiler takes it. (Type keywords are left out: a macro call such as
`INSTANTIATE(double);` reads as declaring `double`.)"""

from __future__ import annotations

from tree_sitter import Node

from dice_lsp.completion.checks.rule import construct
from dice_lsp.cuda.names import declared_by

_VALUE_KEYWORDS = frozenset({b"true", b"false", b"nullptr", b"this"})


def declares_a_keyword(declaration: Node) -> bool:
    return any(name.text in _VALUE_KEYWORDS for name in declared_by(declaration))


RULE = construct("keyword as a variable", frozenset({"declaration"}), declares_a_keyword)
