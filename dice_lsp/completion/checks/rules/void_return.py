"""A `return <value>;` the fill writes inside a function declared `void` (every kernel) fails: nvcc rejects it, and
tree-sitter can see it. (A lambda's return is its own.)"""

from __future__ import annotations

from dice_lsp.completion.checks.request import Placed, Request
from dice_lsp.completion.checks.rule import Fault, Rule


def faults(request: Request, fill: Placed) -> list[Fault]:
    for node in fill.nodes:
        if node.type != "return_statement" or node.named_child_count == 0 or node.start_byte < fill.first:
            continue
        owner = node.parent
        while owner is not None and owner.type not in ("function_definition", "lambda_expression"):
            owner = owner.parent
        if owner is None or owner.type != "function_definition":
            continue
        kind, declarator = owner.child_by_field_name("type"), owner.child_by_field_name("declarator")
        if kind is not None and kind.type == "primitive_type" and kind.text == b"void" and (
                declarator is not None and declarator.type == "function_declarator"):
            return [Fault(None)]
    return []


RULE = Rule("value from void", "parses", faults)
