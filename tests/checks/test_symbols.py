"""The symbol table: what a document declares (kind, block, arity)."""

from __future__ import annotations

from tests.checks.documents import scoped


def test_declarations_have_a_kind_and_a_block() -> None:
    table = scoped().symbols
    kinds = {(d.name, d.kind) for d in table.declarations}
    assert {("SCALE", "macro"), ("real", "type"), ("blend", "prototype"), ("t", "parameter"), ("k", "function"),
            ("count", "parameter"), ("gid", "variable"), ("done", "variable")} <= kinds
    data = table.data
    done = next(d for d in table.declarations if d.name == "done" and d.node.type == "declaration")
    block = done.block()
    assert block is not None and data[block[0]:block[1]].startswith(b"{\n        float done")
    assert next(d for d in table.declarations if d.name == "real").block() is None  # a type: not held to a block


def test_arities_are_those_of_the_functions_declared_outside_bodies() -> None:
    table = scoped().symbols
    assert table.arities["blend"] == [(2, 3)]
    assert table.arities["k"] == [(2, 2)]
    assert "SCALE" in table.functions  # a macro may stand for a function
