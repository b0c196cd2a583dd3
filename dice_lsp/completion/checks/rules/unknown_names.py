"""Every identifier, type or namespace name of the new tree that overlaps the fill (names inside an ERROR node
count too, when tree-sitter labels them so; not names inside attributes) must resolve:
- declared by the fill itself (declarators of declarations, parameters, for-range loops, structured bindings,
  type aliases, classes, enumerators, macros, template parameters), wherever in the fill;
- a CUDA built-in or keyword-like name (`static_cast`, `__LINE__`), a name of the caller's local headers;
- used as a variable (not called, not qualified, not all-caps): a name of the document in scope at the hole, or
  a global of the headers (any of their names after a `using namespace`; `std::size` is no variable of a
  kernel) (`HoleScope.variable`);
- otherwise: a name written in the document outside the region, or declared by the headers.
A namespace is no value (`push_back(std)`), a variable is no type (`(input) out[i]`), and a name the document
writes only as a type is not assigned to (`real = 0.f;`, a declaration that lost its name). The word typed before
the hole, which the fill ends if it does not go on with it, is judged whole (`or = 0;` after `_storage`).
Field names after `.`/`->` are checked leniently: allowed when the word appears anywhere in the document
(comments included), in a local header, in the header index, or is x/y/z/w.
"""

from __future__ import annotations

import re

from tree_sitter import Node

from dice_lsp.completion.checks.hole_scope import local_like
from dice_lsp.completion.checks.request import Placed, Request
from dice_lsp.completion.checks.rule import Fault, Rule
from dice_lsp.completion.checks.symbols import BUILTINS
from dice_lsp.completion.checks.syntax import overlapping
from dice_lsp.cuda.names import FIELD, NAME_TYPES, declared_by

_VECTOR_FIELDS = frozenset({"x", "y", "z", "w"})
_ATTRIBUTES = frozenset({"attribute_specifier", "attribute_declaration", "attribute", "ms_declspec_modifier"})
_VALUE_PLACES = frozenset({"argument_list", "binary_expression", "assignment_expression", "return_statement",
                           "expression_statement", "subscript_argument_list", "parenthesized_expression",
                           "conditional_expression", "unary_expression", "field_expression", "initializer_list"})


def unknown(request: Request, fill: Placed) -> list[tuple[int, str]]:
    """Names the fill uses that resolve nowhere, as (offset in the fill, name); empty: all resolve."""
    new_data = request.prefix + fill.data + request.suffix

    def text(node: Node) -> str:
        return new_data[node.start_byte:node.end_byte].decode("utf-8", "replace")

    declared: set[str] = set()
    used: list[Node] = []
    attributes: list[Node] = []
    typed = re.search(rb"\w$", request.prefix) is not None  # the word typed before the hole, which the fill
    for node in overlapping(fill.root, fill.first - typed, fill.last):  # ends if it does not go on with it
        if node.type in _ATTRIBUTES:
            attributes.append(node)
        declared.update(text(name) for name in declared_by(node))
        if (node.type in NAME_TYPES or node.type == FIELD) and not any(
                a.start_byte <= node.start_byte and node.end_byte <= a.end_byte for a in attributes):
            used.append(node)
    found: list[tuple[int, str]] = []
    for node in used:
        name = text(node)
        if name in declared or (_known_field(request, name) if node.type == FIELD else _known(request, node, name)):
            continue
        found.append((fill.offset(node.start_byte), name))
    return found


def _known(request: Request, node: Node, name: str) -> bool:
    symbols, scope = request.symbols, request.scope
    if _as_value(node) and symbols.namespace_only(name):  # `push_back(std)`: a namespace is no value
        return False
    if _as_type(node) and name in symbols.variables:  # `(input) out[i]`: a variable is no type
        return False
    if _assigned_to(node) and name in symbols.types_only:  # `Index::idx_t = i;`: a type is no variable
        return False
    if name in BUILTINS or name in symbols.local_names:
        return True
    if node.type == "identifier" and local_like(node):  # a variable: in scope here, or a header's global
        return scope.variable(name)
    return name in request.document_names or name in request.headers


def _known_field(request: Request, name: str) -> bool:
    symbols = request.symbols
    return (name in _VECTOR_FIELDS or name in symbols.words or name in request.headers.fields
            or name in request.headers or name in symbols.local_words or name in BUILTINS)


def _as_value(node: Node) -> bool:
    """An identifier where a value is read (an argument, an operand, a returned value, an initialiser)."""
    parent = node.parent
    if node.type != "identifier" or parent is None:
        return False
    if parent.type == "init_declarator":
        return parent.child_by_field_name("value") == node
    return parent.type in _VALUE_PLACES


def _as_type(node: Node) -> bool:
    """A type name where only a type may be: a cast's (`(T) x`) or a declaration's (`T x;`)."""
    parent = node.parent
    if node.type != "type_identifier" or parent is None:
        return False
    if parent.type == "type_descriptor":
        return parent.parent is not None and parent.parent.type == "cast_expression"
    return parent.type == "declaration" and parent.child_by_field_name("type") == node


def _assigned_to(node: Node) -> bool:
    """An identifier that is assigned to (`x = ...`, `ns::x = ...`)."""
    parent = node.parent
    if node.type != "identifier" or parent is None:
        return False
    if parent.type == "qualified_identifier" and parent.child_by_field_name("name") == node:
        node, parent = parent, parent.parent
    return parent is not None and parent.type == "assignment_expression" and parent.child_by_field_name("left") == node


def faults(request: Request, fill: Placed) -> list[Fault]:
    return [Fault((at, at + len(name)), name) for at, name in unknown(request, fill)]


RULE = Rule("unknown names", "names", faults)
