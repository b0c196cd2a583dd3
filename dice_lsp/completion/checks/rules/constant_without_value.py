"""A local `const`/`constexpr` scalar or an `auto` variable declared without a value fails (`const int y;`,
`auto z;`): every compiler rejects it (an `extern` one is declared elsewhere, and stays)."""

from __future__ import annotations

from tree_sitter import Node

from dice_lsp.completion.checks.rule import construct
from dice_lsp.completion.checks.syntax import SCALAR_TYPES


def constant_without_value(declaration: Node) -> bool:
    if declaration.parent is None or declaration.parent.type != "compound_statement":
        return False
    kind = declaration.child_by_field_name("type")
    if kind is None:
        return False
    words = {(c.children[0].type if c.child_count else c.type) for c in declaration.children
             if c.type in ("type_qualifier", "storage_class_specifier")}
    placeholder = kind.type == "placeholder_type_specifier" and kind.text == b"auto"
    constant = bool(words & {"const", "constexpr"}) and kind.type in SCALAR_TYPES and "extern" not in words
    if not (placeholder or constant):
        return False
    return any(child.type == "identifier" for child in declaration.children_by_field_name("declarator"))


RULE = construct("constant without a value", frozenset({"declaration"}), constant_without_value)
