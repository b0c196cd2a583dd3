"""A structured binding typed other than `auto` fails (`float[i] = X[i];`, which the grammar reads as one)."""

from __future__ import annotations

from tree_sitter import Node

from dice_lsp.completion.checks.rule import construct


def typed_binding(binding: Node) -> bool:
    declaration = binding.parent.parent if binding.parent is not None else None
    kind = declaration.child_by_field_name("type") if declaration is not None else None
    return kind is not None and kind.type != "placeholder_type_specifier" and kind.text != b"auto"


RULE = construct("typed binding", frozenset({"structured_binding_declarator"}), typed_binding)
