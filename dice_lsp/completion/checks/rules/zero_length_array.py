"""A zero-length array declared in a function fails (`float items[0];`): no storage (a zero-length array is a GNU
extension for the last member of a struct, which this is not)."""

from __future__ import annotations

from tree_sitter import Node

from dice_lsp.completion.checks.rule import construct


def zero_length_local(array: Node) -> bool:
    size = array.child_by_field_name("size")
    owner = array.parent
    while owner is not None and owner.type in ("array_declarator", "init_declarator", "pointer_declarator"):
        owner = owner.parent
    return (size is not None and size.type == "number_literal" and size.text == b"0" and owner is not None
            and owner.type == "declaration" and owner.parent is not None and owner.parent.type == "compound_statement")


RULE = construct("zero-length local array", frozenset({"array_declarator"}), zero_length_local)
