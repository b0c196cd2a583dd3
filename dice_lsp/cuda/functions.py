"""Function definitions in a CUDA file: name, CUDA qualifiers, and where the body's braces are.

tree-sitter parses half-written files too, so this works on what a user is typing; offsets are string
indices (not bytes) so callers can slice the text they hold. Besides the finished functions
(`parse_functions`), it answers the questions completion asks about a position in a file being typed:
which function body it is in (`enclosing_function`, also when the body's `}` is not written yet),
whether it is inside a comment or a string, and what a function refers to (names, macros, launches).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache, lru_cache
from typing import Literal

import tree_sitter_cuda
from tree_sitter import Language, Node, Parser, Query, QueryCursor, Tree

QUALIFIERS = ("__global__", "__device__", "__host__")
_NAME_TYPES = frozenset({"identifier", "type_identifier", "field_identifier", "namespace_identifier"})
_LITERALS = frozenset({"string_literal", "char_literal", "raw_string_literal", "system_lib_string"})


@cache
def parser() -> Parser:
    return Parser(Language(tree_sitter_cuda.language()))


@dataclass(frozen=True)
class ParsedSource:
    """A parsed text; tree-sitter speaks UTF-8 byte offsets, callers speak string indices."""

    text: str
    data: bytes
    tree: Tree

    @property
    def root(self) -> Node:
        return self.tree.root_node

    def index(self, byte: int) -> int:
        if len(self.data) == len(self.text):
            return byte
        return len(self.data[:byte].decode("utf-8", "replace"))

    def byte(self, index: int) -> int:
        if len(self.data) == len(self.text):
            return index
        return len(self.text[:index].encode("utf-8"))


@lru_cache(maxsize=8)
def parse(text: str) -> ParsedSource:
    """Parse once per text: finding a hole and building its context ask about the same file."""
    data = text.encode("utf-8")
    return ParsedSource(text, data, parser().parse(data))


@dataclass(frozen=True)
class Function:
    name: str
    qualifiers: tuple[str, ...]
    start: int  # the definition (after any template header)
    body_open: int  # index of '{'
    body_close: int  # index of the matching '}'; for an unclosed body, where its '}' would go
    head: int  # where the definition starts, template header included
    closed: bool = True  # False while the body's '}' is not written yet

    @property
    def is_kernel(self) -> bool:
        return "__global__" in self.qualifiers


@cache
def _definition_query() -> Query:
    return Query(Language(tree_sitter_cuda.language()), "(function_definition) @definition")


def _definitions(node: Node) -> list[Node]:
    """Every function definition under `node`, in source order (a query runs in C: a walk of every node
    in Python cost ~15 ms per request on a 1,000-line file)."""
    found = QueryCursor(_definition_query()).captures(node).get("definition", [])
    return sorted(found, key=lambda definition: definition.start_byte)


def _name(definition: Node) -> str:
    declarator = definition.child_by_field_name("declarator")
    while declarator is not None and declarator.type != "function_declarator":
        declarator = declarator.child_by_field_name("declarator")
    target = declarator.child_by_field_name("declarator") if declarator is not None else None
    return target.text.decode("utf-8", "replace") if target is not None and target.text else ""


def _closed(body: Node) -> bool:
    last = body.children[-1] if body.children else None
    return last is not None and last.type == "}" and not last.is_missing


def _function(src: ParsedSource, definition: Node, body: Node, close: int) -> Function:
    qualifiers = tuple(c.type for c in definition.children if c.type in QUALIFIERS)
    parent = definition.parent
    head = parent if parent is not None and parent.type == "template_declaration" else definition
    return Function(_name(definition), qualifiers, src.index(definition.start_byte), src.index(body.start_byte),
                    close, src.index(head.start_byte), _closed(body))


def parse_functions(text: str) -> list[Function]:
    """Every function definition with a complete `{ ... }` body, in source order."""
    src = parse(text)
    functions = []
    for definition in _definitions(src.root):
        body = definition.child_by_field_name("body")
        if body is None or body.has_error or not body.text or not body.text.endswith(b"}"):
            continue
        functions.append(_function(src, definition, body, src.index(body.end_byte) - 1))
    return functions


def _reach(src: ParsedSource, body: Node) -> int:
    """Byte offset just past a body: after its '}', or after the whitespace that follows an unclosed one."""
    if _closed(body):
        return body.end_byte
    rest = src.data[body.end_byte:]
    return body.end_byte + len(rest) - len(rest.lstrip())


def _path(src: ParsedSource, byte: int) -> Iterator[Node]:
    """Nodes that may contain `byte`, outermost first; an unclosed node also owns the whitespace after it."""
    node = src.root
    while True:
        yield node
        following = [c for c in node.children if c.start_byte < byte
                     and (byte < c.end_byte or not src.data[c.end_byte:byte].strip())]
        if not following:
            return
        node = following[-1]


def enclosing_function(text: str, offset: int) -> Function | None:
    """The innermost function whose body (after its '{') holds `offset`, closed or still being typed.

    When syntax errors keep tree-sitter from seeing the definition, falls back to a scan of the braces.
    """
    offset = max(0, min(offset, len(text)))
    src = parse(text)
    byte = src.byte(offset)
    found: Function | None = None
    for node in _path(src, byte):
        body = node.child_by_field_name("body") if node.type == "function_definition" else None
        if (body is not None and body.type == "compound_statement" and body.start_byte < byte <= _reach(src, body)
                and (byte < body.end_byte or not _closed(body))):
            found = _function(src, node, body, src.index(_reach(src, body)) - (1 if _closed(body) else 0))
    return found or _scanned_function(text, offset)


_TOKENS = re.compile(r"""//[^\n]*|/\*.*?(?:\*/|\Z)|"(?:\\.|[^"\\\n])*"?|'(?:\\.|[^'\\\n])*'?"""
                     r"|^[ \t]*#(?:\\\r?\n|[^\n])*|[{}]", re.DOTALL | re.MULTILINE)


def braces(text: str) -> list[tuple[int, str]]:
    """Offsets of the `{` and `}` that are code: not in comments, literals or preprocessor lines.

    A plain scan, so it also works on fragments (a model's fill) and where tree-sitter gave up.
    """
    return [(m.start(), m.group()) for m in _TOKENS.finditer(text) if m.group() in ("{", "}")]


_BYTE_TOKENS = re.compile(rb'//[^\n]*|/\*.*?(?:\*/|\Z)|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|[{};]', re.S)
_CONTAINER = re.compile(rb'(?:\bnamespace(?:\s+[\w:]+)?|\bextern\s*"C(?:\+\+)?")\s*$')


_DIRECTIVE = re.compile(rb"\s*#\s*(\w*)")


_DEAD = re.compile(rb"\s*#\s*if\s+0\s*(?://.*|/\*.*)?")


def _first_branches(data: bytes) -> bytes:
    """`data` with preprocessor lines (continuations included) blanked out, and of every conditional all but one
    branch: the first, or the first after an `#if 0` (same length, line breaks kept). One reading of the code, so
    that braces a conditional opens twice (`#if A` / `f(a) {` / `#else` / `f(b) {` / `#endif`) count once."""
    out: list[bytes] = []
    branches: list[list[bool]] = []  # per open conditional: [a branch was taken, the current one is taken]
    directive = False  # the line continues a directive
    for line in data.splitlines(keepends=True):
        match = None if directive else _DIRECTIVE.match(line)
        if directive or (match is not None and line.lstrip().startswith(b"#")):
            word = match.group(1) if match is not None else b""
            if word in (b"if", b"ifdef", b"ifndef"):
                live = _DEAD.fullmatch(line.rstrip(b"\r\n")) is None
                branches.append([live, live])
            elif word in (b"elif", b"else") and branches:
                branches[-1][1] = not branches[-1][0]
                branches[-1][0] = True
            elif word == b"endif" and branches:
                branches.pop()
            directive = line.rstrip(b"\r\n").endswith(b"\\")
            blank = True
        else:
            blank = not all(taken for _, taken in branches)
        out.append(re.sub(rb"[^\n]", b" ", line) if blank else line)
    return b"".join(out)


def top_level_span(data: bytes, at: int) -> tuple[int, int] | None:
    """The byte span of the top-level definition (a function, a class, a global's initialiser) whose braces
    hold byte `at`, namespaces and `extern "C"` blocks looked through: from just after the `;` or `}` that ends
    the item before it to its closing `}` (and a `;` right after it). None when `at` is in no such braces or
    they do not close (found by braces alone: comments, strings, character literals, preprocessor lines and
    the `#else` branches of conditionals skipped)."""
    open_at: list[tuple[bool, int]] = []  # per open brace: a container's?, and where its item started
    item = 0  # where the current item at the (looked-through) top level starts
    for match in _BYTE_TOKENS.finditer(_first_branches(data)):
        token, pos = match.group(), match.start()
        level = sum(not container for container, _ in open_at)
        if token == b"{":
            container = level == 0 and _CONTAINER.search(data[item:pos].strip()) is not None
            open_at.append((container, item))
            if container:
                item = pos + 1
        elif token == b"}" and open_at:
            container, started = open_at.pop()
            if container or level == 1:
                if not container and started <= at < pos:
                    after = re.match(rb"\s*;", data[pos + 1:])  # a class's or an initialiser's `;`
                    return started, pos + 1 + (after.end() if after else 0)
                item = pos + 1
        elif token == b";" and level == 0:
            item = pos + 1
        if level == 0 and pos > at and not open_at:
            return None
    return None


def blank_prose(data: bytes) -> bytes:
    """`data` with its comments and string and character literals blanked (line breaks kept): the same offsets,
    and no brace or declaration-looking text inside them."""
    def blank(match: re.Match[bytes]) -> bytes:
        text = match.group()
        return text if text in (b"{", b"}", b";") else re.sub(rb"[^\n]", b" ", text)

    return _BYTE_TOKENS.sub(blank, data)


def open_braces(data: bytes, at: int) -> int:
    """How many `{` are open at byte `at` of `data`, read as `top_level_span` reads braces (first branches of
    conditionals only): 0 at top level."""
    depth = 0
    for match in _BYTE_TOKENS.finditer(_first_branches(data[:at])):
        depth += {b"{": 1, b"}": -1}.get(match.group(), 0)
    return max(depth, 0)


_CONTROL = frozenset({"if", "for", "while", "switch", "catch", "return", "sizeof"})


def _signature(before: str) -> re.Match[str] | None:
    """The `name` of a `name(...)` (optionally `const`) that `before` ends with, unless it is a control keyword."""
    tail = before.rstrip()
    tail = tail.removesuffix("const").rstrip()
    depth = 0
    for at in range(len(tail) - 1, -1, -1):
        depth += {")": 1, "(": -1}.get(tail[at], 0)
        if depth <= 0 or tail[at] in ";{}":
            break
    if depth != 0 or not tail.endswith(")") or tail[at] != "(":
        return None
    name = re.search(r"(\w+)\s*$", tail[:at])
    return name if name is not None and name.group(1) not in _CONTROL else None


def _scanned_function(text: str, offset: int) -> Function | None:
    """Where tree-sitter sees no definition (errors around it): the outermost unclosed `{` before
    `offset` that follows `name(...)`, taken as a function body."""
    stack: list[int] = []
    matching: dict[int, int] = {}
    for at, brace in braces(text):
        if brace == "{":
            stack.append(at)
        elif stack:
            matching[stack.pop()] = at
    for open_ in sorted(o for o in (*stack, *matching) if o < offset <= matching.get(o, len(text))):
        before = text[max(0, open_ - 400):open_]
        name = _signature(before)
        if name is not None:
            return _signature_function(text, open_, before, name, matching.get(open_))
    return None


def _signature_function(text: str, open_: int, before: str, name: re.Match[str], close: int | None) -> Function:
    start = open_ - len(before) + name.start(1)
    declaration = before[max(before.rfind(c, 0, name.start(1)) for c in ";{}") + 1:name.start(1)]
    qualifiers = tuple(q for q in QUALIFIERS if q in declaration)
    head = start - len(declaration)
    for line in declaration.split("\n")[:-1]:  # leading blank and preprocessor lines are not the head
        if line.strip() and not line.lstrip().startswith("#"):
            break
        head += len(line) + 1
    return Function(name.group(1), qualifiers, start, open_, len(text) if close is None else close, head,
                    close is not None)


def in_comment_or_string(text: str, offset: int) -> bool:
    """Whether typing at `offset` would add to a comment or a literal (a line comment runs to its end)."""
    src = parse(text)
    byte = src.byte(max(0, min(offset, len(text))))
    node: Node | None = src.root.descendant_for_byte_range(max(0, byte - 1), byte)
    while node is not None:
        if node.type == "comment" or node.type in _LITERALS:
            line_comment = node.type == "comment" and src.data[node.start_byte:node.start_byte + 2] == b"//"
            return node.start_byte < byte < node.end_byte or (line_comment and byte == node.end_byte)
        node = node.parent
    return False


def is_comment(text: str, start: int, end: int) -> bool:
    """Whether text[start:end] is exactly one comment token (not text inside a string or another comment)."""
    src = parse(text)
    first, last = src.byte(start), src.byte(end)
    node = src.root.descendant_for_byte_range(first, last)
    return node is not None and node.type == "comment" and (node.start_byte, node.end_byte) == (first, last)


@cache
def _name_query() -> Query:
    return Query(Language(tree_sitter_cuda.language()), f"[{' '.join(f'({t})' for t in sorted(_NAME_TYPES))}] @n")


def names_used(text: str, start: int, end: int) -> set[str]:
    """Identifiers (variables, calls, types, macro names) written in text[start:end] (a query in C: the walk
    in Python it replaced took ~5 ms per completion for a 50-line function)."""
    src = parse(text)
    first, last = src.byte(start), src.byte(end)
    if first >= last:
        return set()
    cursor = QueryCursor(_name_query())
    cursor.set_byte_range(first, last)
    return {node.text.decode("utf-8", "replace") for node in cursor.captures(src.root).get("n", [])
            if node.text and node.end_byte > first and node.start_byte < last}


@dataclass(frozen=True)
class Directive:
    kind: Literal["include", "define"]
    name: str  # the macro's name; the included path for an include
    start: int
    end: int  # end of the directive's text (its final newline excluded)


def directives(text: str) -> list[Directive]:
    """`#include` and `#define` lines outside function bodies, in source order."""
    src = parse(text)
    found: list[Directive] = []
    stack = [src.root]
    while stack:
        node = stack.pop()
        kind: Literal["include", "define"] | None = None
        if node.type == "preproc_include":
            kind, field = "include", "path"
        elif node.type in ("preproc_def", "preproc_function_def"):
            kind, field = "define", "name"
        if kind is not None:
            name = node.child_by_field_name(field)
            label = name.text.decode("utf-8", "replace") if name is not None and name.text else ""
            end = src.index(node.end_byte)
            found.append(Directive(kind, label, src.index(node.start_byte), end - (text[end - 1:end] == "\n")))
        elif node.type not in ("compound_statement", "comment"):
            stack.extend(reversed(node.children))
    return found


def launch_sites(text: str, kernel: str) -> list[tuple[int, int]]:
    """Spans of the statements that launch `kernel` with `<<<...>>>`."""
    src = parse(text)
    spans = []
    for match in re.finditer(rf"\b{re.escape(kernel)}\s*<<<", text):
        first = src.byte(match.start())
        node: Node | None = src.root.descendant_for_byte_range(first, first + len(kernel.encode("utf-8")))
        if node is None or node.type != "identifier":
            continue
        while node is not None and not (node.type.endswith("_statement") or node.type == "declaration"):
            node = node.parent
        if node is not None:
            spans.append((src.index(node.start_byte), src.index(node.end_byte)))
    return spans
