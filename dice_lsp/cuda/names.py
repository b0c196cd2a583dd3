"""What a tree-sitter-cuda tree declares and writes: the name nodes a declaring node declares (declarators of
declarations and parameters, for-range loops, structured bindings, type aliases, classes, enumerators, macros,
template parameters, lambda init-captures), how many arguments a function declarator takes, and the names written
in a text (name nodes, not comments or strings, and the words of macro bodies).

The completion's symbol table (`dice_lsp.completion.checks.symbols`) and the header index
(`dice_lsp.toolchain.header_index`) both read declarations this way, so a name counts as declared in the user's
file exactly when it would in a header.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import cache

import tree_sitter_cuda
from tree_sitter import Language, Node, Query, QueryCursor

# name nodes a use of a name may be (a member after `.`/`->` is FIELD)
NAME_TYPES = frozenset({"identifier", "type_identifier", "namespace_identifier"})
FIELD = "field_identifier"
# nodes whose `declarator` field(s) declare a name
DECLARING = frozenset({"declaration", "field_declaration", "parameter_declaration", "optional_parameter_declaration",
                       "variadic_parameter_declaration", "type_definition", "for_range_loop", "function_definition",
                       "init_declarator", "condition_clause"})
# nodes whose `name` field is a declared name
NAMING = frozenset({"struct_specifier", "class_specifier", "union_specifier", "enum_specifier", "enumerator",
                    "alias_declaration", "namespace_definition", "preproc_def", "preproc_function_def",
                    "optional_type_parameter_declaration", "concept_definition"})
# every node `declared_by` may find a name in
DECLARES = DECLARING | NAMING | {"preproc_params", "type_parameter_declaration", "lambda_capture_specifier"}
_DECLARATOR_NAMES = frozenset({"identifier", "field_identifier", "type_identifier"})
_WORD = re.compile(rb"[A-Za-z_][A-Za-z0-9_]*")


@cache
def query(pattern: str) -> Query:
    """A compiled tree-sitter-cuda query (compiled once per pattern)."""
    return Query(Language(tree_sitter_cuda.language()), pattern)


def captured(root: Node, pattern: str, name: str) -> list[Node]:
    """The nodes of `root` that `pattern` captures as `@name`."""
    return QueryCursor(query(pattern)).captures(root).get(name, [])


def text_of(node: Node) -> str:
    return (node.text or b"").decode("utf-8", "replace")


def words(data: bytes) -> Iterator[str]:
    """Every identifier-like word of `data`."""
    for match in _WORD.finditer(data):
        yield match.group().decode("ascii")


def names_in(root: Node, data: bytes) -> set[str]:
    """Names tree-sitter found in a parsed text (not in comments or strings), plus the words of macro bodies."""
    found: set[str] = set()
    pattern = "[(identifier) (type_identifier) (field_identifier) (namespace_identifier) (preproc_arg)] @name"
    for node in captured(root, pattern, "name"):
        chunk = data[node.start_byte:node.end_byte]
        if node.type == "preproc_arg":
            found.update(words(chunk))
        else:
            found.add(chunk.decode("utf-8", "replace"))
    return found


def declarator_names(node: Node | None) -> Iterator[Node]:
    """The name node(s) a declarator declares (`*p`, `a[4]`, `&r`, `x = 1`, `[a, b]`, `f(int)` ...)."""
    while node is not None:
        if node.type in _DECLARATOR_NAMES:
            yield node
            return
        if node.type == "structured_binding_declarator":
            yield from (child for child in node.named_children if child.type == "identifier")
            return
        inner = node.child_by_field_name("declarator")
        if inner is None and node.named_children and node.type.endswith("declarator"):
            inner = node.named_children[-1]  # reference_declarator: `&` then the declarator, no field
        node = inner


def declared_by(node: Node) -> Iterator[Node]:
    """Name nodes that `node` itself declares (not its descendants)."""
    if node.type in DECLARING:
        for declarator in node.children_by_field_name("declarator"):
            yield from declarator_names(declarator)
    if node.type in NAMING:
        name = node.child_by_field_name("name")
        if name is not None:
            yield name
    if node.type == "preproc_params" or node.type == "type_parameter_declaration":
        yield from (child for child in node.named_children if child.type in _DECLARATOR_NAMES)
    if node.type == "lambda_capture_specifier":  # init-captures `[n = 4]`
        for child in node.named_children:
            if child.type == "lambda_capture_initializer":
                name = child.child_by_field_name("left")
                if name is not None:
                    yield name


def parameter_counts(declarator: Node) -> tuple[int, float] | None:
    """How many arguments a function declarator takes, as (fewest, most); most is infinite for `...` and
    parameter packs; None when it has no parameter list."""
    parameters = declarator.child_by_field_name("parameters")
    if parameters is None:
        return None
    fewest, most = 0, 0
    for child in parameters.children:
        if child.type in ("...", "variadic_parameter_declaration"):
            return fewest, float("inf")
        if child.type == "parameter_declaration" and child.text != b"void":
            fewest, most = fewest + 1, most + 1
        elif child.type == "optional_parameter_declaration":
            most += 1
    return fewest, most
