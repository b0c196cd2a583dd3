"""The document's names as seen from a hole, on the symbol table (`symbols.SymbolTable`): the queries the names
rules ask.

- in scope: written outside functions or in the hole's function before the hole (code, not comments or strings),
  less the variables that function declares before the hole only in blocks closed by then (the other branch's
  `threads`, a finished loop's `col`), unless the name is also written outside those blocks;
- out of scope (`out_of_scope`): declared only as locals or parameters of other functions (another kernel's
  `tid`), in parameter lists outside the hole's function (a prototype's), or in the hole's function after the
  hole; data members of classes the hole is not in;
- a variable at the hole (`variable`): a name of the document in scope, or a global of the headers (any of
  their names after a `using namespace`);
- provided to the code after the hole (`provides`): in scope, declared after the hole before the use in a block
  that holds it, a function's name, written in another function without being declared there (a global from a
  header the document does not show), a global of the headers, a built-in or a local header's name; what the
  code after the hole uses like a local variable and nothing provides is `needed`;
- the names of the hole's block (`block_names`): what a fill must not declare again.
Other block scopes are not tracked (lenient). Where tree-sitter's blocks around the hole are not the code's (an
error in the function beyond the hole's line, a statement that runs on past it), the whole function is the
scope of its declarations. Which words are written where is read from the text with comments and strings
skipped: a name written in code that tree-sitter could not place still counts.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cached_property

from tree_sitter import Node

from dice_lsp.completion.checks.symbols import BLOCKS, BUILTINS, Declaration, Span, SymbolTable
from dice_lsp.completion.checks.syntax import Error
from dice_lsp.cuda.names import captured, text_of

# nodes that hold statements: a hole inside one of them is between statements, not inside one
_STATEMENT_HOLDERS = BLOCKS | {"else_clause", "case_statement", "do_statement", "labeled_statement", "preproc_if",
                               "preproc_ifdef", "preproc_else", "preproc_elif", "preproc_elifdef", "translation_unit"}
_UNQUALIFIED = re.compile(rb"(?<![\w.])(?<!->)(?<!::)[A-Za-z_][A-Za-z0-9_]*")


def _outermost(nodes: list[Node]) -> list[Span]:
    """The byte spans of `nodes` that lie inside none of the others, in order (sorted, not overlapping)."""
    spans: list[Span] = []
    for node in sorted(nodes, key=lambda n: n.start_byte):
        if not spans or node.start_byte >= spans[-1][1]:
            spans.append((node.start_byte, node.end_byte))
    return spans


def _within(spans: list[Span], at: int) -> bool:
    """Whether byte `at` lies in one of `spans` (sorted, not overlapping): a bisection, not a scan."""
    index = bisect.bisect_right(spans, (at, float("inf"))) - 1
    return index >= 0 and spans[index][0] <= at < spans[index][1]


def _unqualified_words(data: bytes) -> Iterator[str]:
    """Identifier-like words of `data` that are not members (`.x`, `->next`) nor qualified (`std::size`)."""
    for match in _UNQUALIFIED.finditer(data):
        yield match.group().decode("ascii")


def _words_outside(data: bytes, skipped: list[Span]) -> set[str]:
    """The unqualified words of `data` outside the byte ranges `skipped` (which may overlap)."""
    found: set[str] = set()
    at = 0
    for lo, hi in sorted(skipped):
        found.update(_unqualified_words(data[at:max(at, lo)]))
        at = max(at, hi)
    found.update(_unqualified_words(data[at:]))
    return found


def macro_argument(node: Node) -> bool:
    """`i` in `CUDA_KERNEL_LOOP(i, n)`: an argument of a call to an all-caps name (a macro may declare it)."""
    arguments = node.parent
    call = arguments.parent if arguments is not None and arguments.type == "argument_list" else None
    callee = call.child_by_field_name("function") if call is not None else None
    name = text_of(callee) if callee is not None else ""
    return bool(name) and name.upper() == name and any(c.isalpha() for c in name)


def local_like(node: Node) -> bool:
    """An identifier used the way a local variable is: not called, not qualified, not all-caps (a macro or a
    constant from a header the document does not show), not a macro's argument."""
    name = text_of(node)
    parent = node.parent
    if name.upper() == name or name.endswith("_") or parent is None or macro_argument(node):
        return False
    if parent.type == "call_expression" and parent.child_by_field_name("function") == node:
        return False
    return parent.type not in ("qualified_identifier", "template_function", "template_type", "template_argument_list")


@dataclass(frozen=True)
class _Written:
    """Where the document's names are written and declared, seen from a hole (see `HoleScope`)."""

    visible: frozenset[str] = frozenset()
    elsewhere: frozenset[str] = frozenset()
    declared_elsewhere: frozenset[str] = frozenset()
    declared_after: frozenset[str] = frozenset()
    members: frozenset[str] = frozenset()
    later: tuple[tuple[str, int, int, int], ...] = ()


class HoleScope:
    """The document's names as seen from a hole: which are in scope there, which are out of it, which the code
    after the hole is provided with, which its block declares. Built from the symbol table once per request."""

    def __init__(self, table: SymbolTable, hole: int, enclosing: Node | None, hole_line: Span,
                 errors: tuple[Error, ...], names: Callable[[], frozenset[str]]) -> None:
        self.table, self.hole, self.enclosing = table, hole, enclosing
        self.hole_line, self.errors, self._names = hole_line, errors, names

    @cached_property
    def names(self) -> frozenset[str]:
        """The names the document writes that a fill may use."""
        return self._names()

    @cached_property
    def blocks_hold(self) -> bool:
        """Whether tree-sitter's blocks in the function are the code's: no error in it beyond the hole's line,
        and the hole not inside a statement that runs on past its line (then every declaration of the function
        counts function-wide)."""
        function = self.enclosing
        if function is None:
            return False
        line_start, line_end = self.hole_line
        return not any(e.start < function.end_byte and function.start_byte < e.end and not (
            line_start <= e.start and e.end <= line_end + 1) for e in self.errors) and not (
            self._statement_runs_on(function, line_end))

    def _statement_runs_on(self, function: Node, line_end: int) -> bool:
        """Whether the hole is inside a statement that goes on past its line (a call whose `(` the lines above
        opened, a half-typed line read with the next): tree-sitter then reads the code below as part of it, and its
        blocks there are not the code's."""
        node = self.table.root.descendant_for_byte_range(self.hole, self.hole)
        while node is not None and node != function:
            if node.type not in _STATEMENT_HOLDERS and node.start_byte < self.hole and node.end_byte > line_end:
                return True
            node = node.parent
        return False

    def scope_of(self, declaration: Declaration, function: Node) -> Span:
        """Where the names a declaration of the hole's function declares are in scope: its block where blocks
        hold and it is held to one, else the whole function."""
        block = declaration.block() if self.blocks_hold else None
        return block if block is not None else (function.start_byte, function.end_byte)

    @cached_property
    def _written(self) -> _Written:
        """Where the document's names are written and declared, seen from the hole. Queries and a regex rather
        than a walk in Python: this runs once per completion, on files of thousands of lines."""
        enclosing = self.enclosing
        if enclosing is None:
            return _Written()
        table, root, data = self.table, self.table.root, self.table.data
        functions = _outermost(captured(root, "(function_definition) @f", "f"))
        others = [(lo, hi) for lo, hi in functions if not lo <= self.hole < hi]  # not the one around the hole
        after = (self.hole, enclosing.end_byte)
        prose = [(n.start_byte, n.end_byte) for n in captured(
            root, "[(comment) (string_literal) (raw_string_literal) (char_literal)] @p", "p")]
        # parameter lists outside the function around the hole (prototypes, function-pointer types): their names
        # are in no scope the hole can see
        around = [(lo, hi) for lo, hi in functions if lo <= self.hole < hi] or [
            (enclosing.start_byte, enclosing.end_byte)]
        lists = [(lo, hi) for lo, hi in _outermost(captured(root, "(parameter_list) @l", "l"))
                 if not around[0][0] <= lo < around[0][1]]
        visible = _words_outside(data, [*others, after, *prose, *lists])
        ends = [(0, 0), *others]  # the code between other functions (and before the first, after the last)
        gaps = [(ends[i][1], lo) for i, (lo, _) in enumerate([*others, (len(data), len(data))])]
        elsewhere = _words_outside(data, [*gaps, *prose])
        declared_elsewhere: set[str] = set()
        declared_after: set[str] = set()
        later: list[tuple[str, int, int, int]] = []
        closed: dict[str, list[Span]] = {}  # declared before the hole in a block closed by then
        open_before: set[str] = set()  # declared before the hole in a scope that holds it
        line_start = self.hole_line[0]
        for declaration in table.declarations:
            at, name = declaration.at, declaration.name
            if declaration.kind == "function":  # a function's name is the file's, wherever it is defined
                visible.add(name)
            elif _within(others, at) or _within(lists, at):
                declared_elsewhere.add(name)
            elif after[0] <= at < after[1]:
                declared_after.add(name)
                lo, hi = self.scope_of(declaration, enclosing)  # (else: anywhere after the hole)
                later.append((name, at if self.blocks_hold else 0, lo, hi))
            elif enclosing.start_byte <= at < self.hole:
                lo, hi = self.scope_of(declaration, enclosing)
                if hi <= line_start:  # (a block that ends on the hole's line may go on there)
                    closed.setdefault(name, []).append((lo, hi))
                else:
                    open_before.add(name)
        closed_only = set(closed) - open_before
        if closed_only:  # such a name is no longer in scope, unless it is also written outside those blocks
            blocks = [block for name in closed_only for block in closed[name]]
            closed_only -= _words_outside(data, [*others, after, *prose, *lists, *blocks])
            visible -= closed_only
            declared_elsewhere |= closed_only
        return _Written(frozenset(visible), frozenset(elsewhere), frozenset(declared_elsewhere),
                        frozenset(declared_after), self._members(functions, [*others, after, *prose]), tuple(later))

    def _members(self, functions: list[Span], skipped: list[Span]) -> frozenset[str]:
        """Data members of classes the hole is not in, that no code outside those classes and outside functions
        writes (a global of the same name): not variables at the hole. Empty where the hole's function may see
        members of classes it is not written in (an out-of-line `Foo::bar`, a class with base classes)."""
        enclosing = self.enclosing
        declarator = enclosing.child_by_field_name("declarator") if enclosing is not None else None
        while declarator is not None and declarator.type != "qualified_identifier":
            declarator = declarator.child_by_field_name("declarator")
        if enclosing is None or declarator is not None:
            return frozenset()
        owner = enclosing.parent
        while owner is not None and owner.type not in ("class_specifier", "struct_specifier"):
            owner = owner.parent
        if owner is not None and any(child.type == "base_class_clause" for child in owner.children):
            return frozenset()
        bodies = [n for n in captured(self.table.root, "(field_declaration_list) @b", "b")
                  if not n.start_byte <= self.hole < n.end_byte and not _within(functions, n.start_byte)]
        spans = {(body.start_byte, body.end_byte) for body in bodies}
        members = {d.name for d in self.table.declarations if d.kind == "member" and (parent := d.node.parent)
                   is not None and parent.type == "field_declaration_list"
                   and (parent.start_byte, parent.end_byte) in spans}
        outside = _words_outside(self.table.data, [*skipped, *((b.start_byte, b.end_byte) for b in bodies)])
        return frozenset(members - outside)

    # -- queries

    @cached_property
    def out_of_scope(self) -> frozenset[str]:
        """Names of the document that a variable at the hole cannot be: declared only as locals or parameters
        of other functions (another kernel's `tid`) or of this one after the hole, and never written outside
        functions nor in this function before the hole; data members of other classes. Empty when the hole is
        in no function that parses."""
        written = self._written
        return ((written.declared_elsewhere | written.declared_after) - written.visible) | written.members

    def variable(self, name: str) -> bool:
        """Whether an unqualified variable at the hole may be `name`: a name of the document in scope there, a
        global of the headers (any of their names after a `using namespace`)."""
        return (name in self.names and name not in self.out_of_scope) or (
            name in self.table.headers.globals or (self.uses_namespace and name in self.table.headers))

    @cached_property
    def uses_namespace(self) -> bool:
        """A `using namespace` in the document or its local headers: the headers' namespaces reach plain code."""
        return b"using namespace" in self.table.data or any("using namespace" in h for h in self.table.local_headers)

    @cached_property
    def names_in_scope(self) -> frozenset[str]:
        """Names a fill may use at the hole without declaring them, from the document, its local headers and
        the CUDA built-ins (not the headers' thousands): what a misspelt name may have meant."""
        return (self.names - self.out_of_scope) | BUILTINS | self.table.local_names

    def provides(self, name: str, at: int) -> bool:
        """Whether something in scope provides `name` to the code at byte `at` after the hole: written outside
        functions or in this function before the hole, declared in this function after the hole before `at` and
        in a scope that holds it (another branch's own `val` is not), written in another function that does not
        declare it (a global from a header the document does not show), a global of the headers, a built-in or a
        local header's name."""
        written = self._written
        return (name in written.visible
                or any(n == name and start <= at and lo <= at < hi for n, start, lo, hi in written.later)
                or name in self.table.headers.globals or (self.uses_namespace and name in self.table.headers)
                or name in BUILTINS or name in self.table.local_names
                or (name in written.elsewhere and name not in written.declared_elsewhere))

    @cached_property
    def needed(self) -> frozenset[str]:
        """Names the code after the hole (in its function) uses like local variables that nothing in scope
        there provides (`provides`): the deleted code declared them. Empty outside a function that parses."""
        function = self.enclosing
        if function is None:
            return frozenset()
        needed = set()
        stack = [function]
        while stack:
            node = stack.pop()
            if node.end_byte <= self.hole:
                continue
            if node.type == "identifier" and node.start_byte >= self.hole and local_like(node):
                name = text_of(node)
                if not self.provides(name, node.start_byte):
                    needed.add(name)
            stack.extend(node.children)
        return frozenset(needed)

    @cached_property
    def block_names(self) -> frozenset[str]:
        """Names declared in the block the hole is in (its own statements; the parameters too when the block is
        the function's body): a fill that declares one again does not compile."""
        function = self.enclosing
        if function is None:
            return frozenset()
        block = self.table.root.descendant_for_byte_range(self.hole, self.hole)
        while block is not None and block.type != "compound_statement" and block != function:
            block = block.parent
        if block is None or block.type != "compound_statement":
            return frozenset()
        names = {d.name for d in self.table.declarations if d.node.type == "declaration" and d.node.parent == block
                 and not d.node.start_byte <= self.hole <= d.node.end_byte}  # not the half-typed line's own
        if block == function.child_by_field_name("body"):
            declarator = function.child_by_field_name("declarator")
            while declarator is not None and declarator.type != "function_declarator":
                declarator = declarator.child_by_field_name("declarator")
            parameters = declarator.child_by_field_name("parameters") if declarator is not None else None
            if parameters is not None:
                names.update(d.name for d in self.table.declarations
                             if d.kind == "parameter" and d.node.parent == parameters)
        return frozenset(names)
