"""An integer variable initialised with a literal that has a fraction fails (`int blocks = 1.8;`): the value the
code reads is another (clang's -Wliteral-conversion). A whole number written as a fraction (`int two = 2.0;`,
`size_t m = 1e3;`) loses nothing, and stays."""

from __future__ import annotations

import re

from tree_sitter import Node

from dice_lsp.completion.checks.rule import construct
from dice_lsp.completion.checks.syntax import SCALAR_TYPES
from dice_lsp.cuda.names import text_of

_INTEGRAL = re.compile(r"(unsigned |signed |long |short )*(int|char|short|long|unsigned|signed|bool|size_t|ssize_t"
                       r"|ptrdiff_t|u?int(8|16|32|64)_t|u?int_fast(8|16|32|64)_t)")
_FRACTION = re.compile(r"(\d+\.\d*|\.\d+|\d+)([eE][-+]?\d+)?[fFlL]?")


def fraction_into_integer(declaration: Node) -> bool:
    kind = declaration.child_by_field_name("type")
    if kind is None or kind.type not in SCALAR_TYPES or not _INTEGRAL.fullmatch(" ".join(text_of(kind).split())):
        return False
    for declarator in declaration.children_by_field_name("declarator"):
        value = declarator.child_by_field_name("value") if declarator.type == "init_declarator" else None
        literal = text_of(value) if value is not None else ""
        if value is not None and value.type == "number_literal" and not literal.lower().startswith("0x") and (
                "." in literal or "e" in literal.lower()) and _FRACTION.fullmatch(literal):
            number = float(literal.rstrip("fFlL"))
            if number != int(number):
                return True
    return False


RULE = construct("fraction into an integer", frozenset({"declaration"}), fraction_into_integer)
