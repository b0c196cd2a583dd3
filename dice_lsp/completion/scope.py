"""The names of the function around a hole, as the candidate sources and the show filter need them: its
parameters and the locals declared above the hole that are in scope there, whether each is a pointer (or array),
and how often the rest of the function uses it, the hole's line left out.

A kernel uses every parameter it takes: a parameter that no line of the function uses yet is what the hole most
likely uses (`c` in `c[i] = a[i] + b[i];` when the hole is that line), and a local declared above and never read
is what it most likely reads. The idiom bank's values with a name their key does not bind (`if ($0 < $1) {`) are
completed with such names (`bind`), and the filter reads how many of them a candidate uses.

A view on the checks' symbol table (`checks.symbols`, `checks.hole_scope`), read from the request's tree (the
document with the hole's region removed, `checks.request.Request`): the caller passes the request its checks
already parsed, so the table is built once per request; without one (a source asked on its own, a test) the
request is built here the same way. On that tree:
- the function is the innermost `function_definition` whose body holds the hole (a method in a class, an indented
  or templated function, a signature over several lines); where the text typed on the hole's line keeps
  tree-sitter from seeing one, makes it err beyond the hole's line or read that line with the next ones (as the
  checks' `typed_line` finds), the tree with the typed text blanked (`Request.blanked`) is asked; where neither
  has one, no names;
- its parameters are the declarations of its own parameter list; its locals are the variable declarations of its
  body (a `for`'s and an `if`'s included) whose name is written above the hole's line and whose block holds the
  hole (C++'s block scope: a local of a sibling block closed above is not in scope); where tree-sitter's blocks
  are not the code's (`HoleScope.blocks_hold`: an error beyond the hole's line) every declaration counts
  function-wide;
- a name is a pointer where its declarator is a pointer or an array declarator, a pointer to const where its
  declaration's type carries `const` (`const float* p`, `float const* p`; not `float* const p`), shared memory
  where the declaration carries `__shared__`; its type is the declaration's type as written (`unsigned int`,
  `size_t`, `dim3`: what the rules source reads to tell a count from a value);
- its uses are the identifier nodes of the function with its text outside the hole's line, declarations left out
  (members after `.`/`->`, comments and strings are no identifiers); where the hole's text opened a block
  (`if (...) {`), the code below closes one block too many and tree-sitter ends the function at that `}`: the
  uses are then counted on to the first `}` as deep as the function's first line (`_uses_end`).
"""

from __future__ import annotations

import re
import weakref
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property

from tree_sitter import Node, QueryCursor

from dice_lsp.completion.checks.request import Request
from dice_lsp.completion.checks.symbols import Declaration
from dice_lsp.completion.lexing import declared_name
from dice_lsp.cuda.names import declarator_names, query, text_of

_WORD = re.compile(r"[A-Za-z_]\w*")
_COMMENT = re.compile(r"//[^\n]*|/\*.*?(?:\*/|$)", re.DOTALL)
_STRING = re.compile(r'"(?:\\.|[^"\\\n])*"')
# declaring nodes of variables and parameters (an `init_declarator`'s name is its `declaration`'s too)
_VARIABLES = frozenset({"declaration", "parameter_declaration", "optional_parameter_declaration",
                        "variadic_parameter_declaration", "for_range_loop"})
_POINTERS = frozenset({"pointer_declarator", "array_declarator"})


@dataclass(frozen=True)
class Name:
    """A name of the function around the hole."""

    name: str
    pointer: bool  # declared with `*` or `[...]`: it is subscripted or dereferenced, not compared with a count
    constant: bool  # a pointer to const (or a const array): read, never written through
    parameter: bool
    uses: int  # its identifiers in the function outside the hole's line (declarations not counted)
    type: str = ""  # the declaration's type as written, qualifiers aside (`int`, `unsigned int`, `float`, `size_t`)
    shared: bool = False  # declared `__shared__`: block-local memory every thread of the block sees


def _code(text: str) -> str:
    """`text` without comments and string literals (their words are not uses)."""
    return _STRING.sub('""', _COMMENT.sub(" ", text))


def _name_node(declaration: Declaration) -> Node | None:
    """The name node by which `declaration`'s node declares its name."""
    for declarator in declaration.node.children_by_field_name("declarator"):
        for name in declarator_names(declarator):
            if text_of(name) == declaration.name:
                return name
    return None


def _pointer(name: Node, declaring: Node) -> bool:
    """Whether a pointer or an array declarator lies between a declared name and its declaring node."""
    node = name.parent
    while node is not None and node != declaring:
        if node.type in _POINTERS:
            return True
        node = node.parent
    return False


def _const_type(declaring: Node) -> bool:
    """Whether a declaration's type (its own qualifiers, not a declarator's) is `const`."""
    return "const" in _qualifiers(declaring)


def _qualifiers(declaring: Node) -> frozenset[str]:
    """A declaration's own type qualifiers (`const`, `__shared__`, ...), not a declarator's."""
    return frozenset(text_of(child) for child in declaring.children if child.type == "type_qualifier")


def _parameters(function: Node) -> Node | None:
    """A function definition's parameter list."""
    declarator = function.child_by_field_name("declarator")
    while declarator is not None and declarator.type != "function_declarator":
        declarator = declarator.child_by_field_name("declarator")
    return declarator.child_by_field_name("parameters") if declarator is not None else None


def _indentation(data: bytes, node: Node) -> int:
    """The columns of white space before the first character on `node`'s first line."""
    start = data.rfind(b"\n", 0, node.start_byte) + 1
    line = data[start:node.start_byte]
    return len(line) - len(line.lstrip())


def _uses_end(request: Request, function: Node) -> int:
    """Where the code a function's uses are counted in ends: the function's end, or where its closing `}` stands
    deeper than its first line and first on its line (the hole's text opened a block, `if (...) {`: the code below
    closes one block too many and tree-sitter ends the function early), the first `}` below that stands as deep
    as the function's first line, before any other function definition."""
    body = function.child_by_field_name("body")
    close = body.children[-1] if body is not None and body.children else None
    indent = _indentation(request.data, function)
    if close is None or close.type != "}" or close.start_point.column <= indent or _indentation(
            request.data, close) != close.start_point.column:
        return function.end_byte
    cursor = QueryCursor(query('[("}") (function_definition)] @n'))
    cursor.set_byte_range(function.end_byte, len(request.data))
    for node in sorted(cursor.captures(request.tree.root_node).get("n", []), key=lambda n: n.start_byte):
        if node.start_byte < function.end_byte or node.type == "function_definition":
            break
        if node.start_point.column == indent and _indentation(request.data, node) == indent:
            return node.end_byte
    return function.end_byte


def _enclosing(request: Request) -> Node | None:
    """The innermost function definition of `request`'s tree whose body holds its hole (not one that the text typed
    on the hole's line begins: `size_t ` above an `if (...) {` reads as a function named `if`)."""
    node: Node | None = request.tree.root_node.descendant_for_byte_range(request.hole, request.hole)
    while node is not None:
        body = node.child_by_field_name("body") if node.type == "function_definition" else None
        if body is not None and body.start_byte < request.hole < body.end_byte:
            return node
        node = node.parent
    return None


_MADE: weakref.WeakKeyDictionary[Request, FunctionScope] = weakref.WeakKeyDictionary()  # `FunctionScope.of`


@dataclass(frozen=True)
class FunctionScope:
    """The function around a hole (`before` ends at the cursor, `after` starts there); `checks`: the request the
    checks parsed for this hole (the document `before + after` with the cursor as its region), reused when given."""

    before: str
    after: str
    checks: Request | None = field(default=None, compare=False, repr=False)

    @classmethod
    def of(cls, before: str, after: str, checks: Request | None = None) -> FunctionScope:
        """The scope of the hole, made once per checks' request: the idiom bank and the show filter's features
        both read it for each completion (without `checks`, a new one)."""
        if checks is None:
            return cls(before, after)
        found = _MADE.get(checks)
        if found is None or found.before != before or found.after != after:
            found = _MADE[checks] = cls(before, after, checks)
        return found

    @cached_property
    def _request(self) -> Request:
        """The checks' request for the hole, or one built the same way when none (or another hole's) was given."""
        checks = self.checks
        if checks is not None and checks.text[:checks.start] == self.before and checks.text[checks.end:] == self.after:
            return checks
        return Request(self.before + self.after, len(self.before), len(self.before))

    @cached_property
    def _function(self) -> tuple[Request, Node] | None:
        """The request whose tree has a function around the hole and that function: the request's own where its
        function parses beyond the hole's line (`Request.enclosing`) and its blocks are the code's or nothing is
        typed on the hole's line, else the one with the typed text blanked where that one's function parses, else
        the first that has a function at all; None where neither has one."""
        found = []
        for blanked in (False, True):  # (the blanked request is parsed only when asked for)
            request = self._request.blanked if blanked else self._request
            function = _enclosing(request)
            typed = request.data[request.hole_line[0]:request.hole].strip()
            if function is not None and request.enclosing == function and (request.scope.blocks_hold or not typed):
                return request, function
            if function is not None:
                found.append((request, function))
            if not typed:  # nothing to blank
                break
        return found[0] if found else None

    @cached_property
    def signature(self) -> str:
        """The function's text before its body (its return type, qualifiers, name and parameters)."""
        if self._function is None:
            return ""
        request, function = self._function
        body = function.child_by_field_name("body")
        end = body.start_byte if body is not None else function.end_byte
        return request.data[function.start_byte:end].decode("utf-8", "replace")

    @cached_property
    def body_above(self) -> str | None:
        """The function's body above the hole's line, after its opening `{` (its first lines, not its signature
        however many lines that takes); None where no function holds the hole."""
        if self._function is None:
            return None
        request, function = self._function
        body = function.child_by_field_name("body")
        line_start = request.hole_line[0]
        if body is None or body.start_byte >= line_start:
            return None
        return request.data[body.start_byte + 1:line_start].decode("utf-8", "replace")

    @cached_property
    def is_kernel(self) -> bool:
        """The function is a `__global__` kernel."""
        return "__global__" in self.signature

    @cached_property
    def names(self) -> Mapping[str, Name]:
        """The parameters, then the locals declared above the hole's line that are in scope at the hole, in the
        order the function declares them, by name."""
        if self._function is None:
            return {}
        request, function = self._function
        line_start, line_end = request.hole_line
        parameters = _parameters(function)
        holds = request.enclosing == function and request.scope.blocks_hold
        whole = (function.start_byte, function.end_byte)
        declaring: set[int] = set()  # where the function's declared names stand (no uses)
        found: list[tuple[int, Name]] = []  # (where, its name without uses)
        for declaration in request.symbols.declarations:
            node = declaration.node
            if node.type not in _VARIABLES or declaration.kind not in ("variable", "parameter") or not (
                    whole[0] <= node.start_byte < whole[1]):
                continue
            name = _name_node(declaration)
            if name is None:
                continue
            declaring.add(name.start_byte)
            parameter = parameters is not None and node.parent == parameters
            if not parameter:
                lo, hi = (declaration.block() if holds else None) or whole
                if name.end_byte > line_start or not lo <= request.hole or hi <= line_start:
                    continue  # declared on the hole's line or below, or in a block closed above
            pointer = _pointer(name, node)
            declared_type = node.child_by_field_name("type")
            found.append((name.start_byte, Name(declaration.name, pointer, pointer and _const_type(node), parameter, 0,
                                                "" if declared_type is None else text_of(declared_type),
                                                "__shared__" in _qualifiers(node))))
        cursor = QueryCursor(query("(identifier) @i"))
        cursor.set_byte_range(function.start_byte, _uses_end(request, function))
        uses = Counter(text_of(node) for node in cursor.captures(request.tree.root_node).get("i", [])
                       if node.start_byte not in declaring and not line_start <= node.start_byte < line_end)
        out: dict[str, Name] = {}
        for _, found_name in sorted(found, key=lambda pair: pair[0]):
            out.setdefault(found_name.name, replace(found_name, uses=uses[found_name.name]))
        return out

    @cached_property
    def unused(self) -> frozenset[str]:
        """The names no line of the function but the hole's uses."""
        return frozenset(name for name, found in self.names.items() if found.uses == 0)

    def unused_in(self, text: str) -> int:
        """How many of the unused names `text` (a candidate's line) uses."""
        return len(self.unused & set(_WORD.findall(_code(text))))


_PLACEHOLDER = re.compile(r"\$(\d+)")
_ASSIGNED = re.compile(r"\s*\[[^=;]*\]\s*[-+*/%&|^]?=(?!=)")  # `[...] =` / `[...] +=` after a name: it is written
MAX_FREE = 3  # free placeholders a value may have to be completed from the scope


def _dereferenced(before: str) -> bool:
    """Whether a name after `before` is dereferenced (`*p`, `&a`), not multiplied or and-ed (`x * p`, `a && p`)."""
    if not before.endswith(("*", "&")) or before.endswith(("&&", "**")):
        return False
    operand = before[:-1].rstrip()
    return not operand or not (operand[-1].isalnum() or operand[-1] in "_)]")


def _role(value: str, start: int, end: int) -> str | None:
    """What a placeholder at value[start:end] must name: "written" (a pointer or array the value stores into),
    "pointer" (subscripted or dereferenced), "scalar", or None where no local variable fits (a member after
    `.`/`->`, a function called, a type)."""
    after = value[end:].lstrip()
    before = value[:start].rstrip()
    if before.endswith((".", "->", "::")) or after.startswith(("(", "::", "<")):
        return None
    if after.startswith("["):
        return "written" if not before and _ASSIGNED.match(value, end) else "pointer"
    if _dereferenced(before):
        return "pointer"
    if after[:1].isalpha() or after[:1] == "_":  # `$1 x`: a type
        return None
    return "scalar"


def _fits(name: Name, role: str) -> bool:
    if role == "scalar":
        return not name.pointer
    return name.pointer and not (role == "written" and name.constant)


@dataclass(frozen=True)
class Binding:
    """A value's placeholders completed from the scope: the names (`$i` -> names[i]), how many placeholders the
    scope named, and how many other ways it had (0: the only names that fit)."""

    names: list[str]
    bound: int
    alternatives: int


def bind(value: str, bound: list[str | None], scope: FunctionScope) -> Binding | None:
    """`bound` (the value's placeholders bound so far, None where free) completed with names of the function
    around the hole: each free placeholder takes a name of its role (`_role`) that the value does not use yet,
    from the unused names (`FunctionScope.unused`) where one fits, in the order the function declares them
    (`c[i] = a[i] + b[i]` writes the one pointer that is not const and reads the others in parameter order).
    None when a free placeholder has no name that fits, or the value has more than `MAX_FREE`."""
    free: dict[int, str] = {}
    declares = declared_name(_PLACEHOLDER.sub(lambda m: f"v{m.group(1)}", value))
    for match in _PLACEHOLDER.finditer(value):
        i = int(match.group(1))
        if (i < len(bound) and bound[i] is not None) or i in free:
            continue
        if declares == f"v{i}":  # the name the value declares is a new one, not one of the scope's
            return None
        role = _role(value, match.start(), match.end())
        if role is None:
            return None
        free[i] = role
    if not free or len(free) > MAX_FREE:
        return None
    taken = {name for name in bound if name is not None}
    full = [*bound, *([None] * (max(free) + 1 - len(bound)))]
    alternatives = 0
    for i, role in sorted(free.items(), key=lambda item: item[1] != "written"):
        fitting = [n for n in scope.names.values() if _fits(n, role) and n.name not in taken]
        options = [n.name for n in fitting if n.uses == 0] or [n.name for n in fitting]
        if not options:
            return None
        full[i] = options[0]
        taken.add(options[0])
        alternatives += len(options) - 1
    return Binding([name or "" for name in full], len(free), alternatives)
