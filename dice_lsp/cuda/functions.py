"""Function definitions in a CUDA file: name, CUDA qualifiers, and where the body's braces are.

tree-sitter parses half-written files too, so this works on what a user is typing; offsets are string
indices (not bytes) so callers can slice the text they hold.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache

import tree_sitter_cuda
from tree_sitter import Language, Node, Parser

QUALIFIERS = ("__global__", "__device__", "__host__")


@cache
def parser() -> Parser:
    return Parser(Language(tree_sitter_cuda.language()))


@dataclass(frozen=True)
class Function:
    name: str
    qualifiers: tuple[str, ...]
    start: int  # the definition (after any template header)
    body_open: int  # index of '{'
    body_close: int  # index of the matching '}'

    @property
    def is_kernel(self) -> bool:
        return "__global__" in self.qualifiers


def _definitions(node: Node) -> Iterator[Node]:
    if node.type == "function_definition":
        yield node
    for child in node.children:
        yield from _definitions(child)


def _name(definition: Node) -> str:
    declarator = definition.child_by_field_name("declarator")
    while declarator is not None and declarator.type != "function_declarator":
        declarator = declarator.child_by_field_name("declarator")
    target = declarator.child_by_field_name("declarator") if declarator is not None else None
    return target.text.decode("utf-8", "replace") if target is not None and target.text else ""


def parse_functions(text: str) -> list[Function]:
    """Every function definition with a complete `{ ... }` body, in source order."""
    data = text.encode("utf-8")
    to_index = _byte_to_index(text, data)
    functions = []
    for definition in _definitions(parser().parse(data).root_node):
        body = definition.child_by_field_name("body")
        if body is None or body.has_error or not body.text or not body.text.endswith(b"}"):
            continue
        qualifiers = tuple(c.type for c in definition.children if c.type in QUALIFIERS)
        functions.append(Function(_name(definition), qualifiers, to_index(definition.start_byte),
                                  to_index(body.start_byte), to_index(body.end_byte) - 1))
    return functions


def _byte_to_index(text: str, data: bytes) -> Callable[[int], int]:
    if len(data) == len(text):
        return lambda offset: offset
    return lambda offset: len(data[:offset].decode("utf-8", "replace"))
