"""The document's symbol table: every name it declares (with what declares it, where, and the block it is held
to), the functions it declares with how many arguments each takes, and the names it writes, read once from the
base's tree; the CUDA built-ins, the caller's local headers and the header index are the outer scope.

`SymbolTable.at(hole, ...)` gives the scope at a hole (`HoleScope`), on which the names rules are short queries:
- in scope: written outside functions or in the hole's function before the hole (code, not comments or strings),
  less the variables that function declares before the hole only in blocks closed by then (the other branch's
  `threads`, a finished loop's `col`), unless the name is also written outside those blocks;
- out of scope (`out_of_scope`): declared only as locals or parameters of other functions (another kernel's
  `tid`), in parameter lists outside the hole's function (a prototype's), or in the hole's function after the
  hole; data members of classes the hole is not in (`members`);
- provided to the code after the hole (`provides`): in scope, declared after the hole before the use in a block
  that holds it, a function's name, written in another function without being declared there (a global from a
  header the document does not show), a global of the headers (any of their names after a `using namespace`);
- the names of the hole's block (`block_names`): what a fill must not declare again;
- arities (`arities`): the argument counts of the functions declared outside bodies, each over its overloads.
Other block scopes are not tracked (lenient). Where tree-sitter's blocks around the hole are not the code's (an
error in the function beyond the hole's line, a statement that runs on past it), the whole function is the
scope of its declarations. Which words are written where is read from the text with comments and strings
skipped: a name written in code that tree-sitter could not place still counts.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Literal, NamedTuple

from tree_sitter import Node

from dice_lsp.completion.checks.syntax import Error
from dice_lsp.cuda.functions import parser
from dice_lsp.cuda.names import DECLARES, captured, declared_by, names_in, parameter_counts, text_of, words
from dice_lsp.toolchain.header_index import HeaderIndex


def _wordset(text: str) -> frozenset[str]:
    return frozenset(text.split())


# words a half-typed word may be the start of (`ret` of `return`): then it is no name yet (`typed_line`)
KEYWORDS = _wordset("""
alignas alignof auto bool break case catch char class const constexpr const_cast continue decltype default delete
do double dynamic_cast else enum explicit extern false float for friend goto if inline int long mutable namespace
new noexcept nullptr operator private protected public register reinterpret_cast return short signed sizeof
static static_assert static_cast struct switch template this throw true try typedef typename union unsigned using
virtual void volatile while __global__ __device__ __host__ __shared__ __constant__ __forceinline__ __restrict__
""")
# CUDA built-ins (they also come from the header index) and keyword-like names tree-sitter labels as names
BUILTINS = _wordset("""
threadIdx blockIdx blockDim gridDim warpSize clusterIdx clusterDim
__syncthreads __syncthreads_count __syncthreads_and __syncthreads_or __syncwarp __threadfence
__threadfence_block __threadfence_system __activemask __ballot_sync __all_sync __any_sync __match_any_sync
__match_all_sync __shfl_sync __shfl_up_sync __shfl_down_sync __shfl_xor_sync __reduce_add_sync
__reduce_min_sync __reduce_max_sync __reduce_and_sync __reduce_or_sync __reduce_xor_sync
atomicAdd atomicSub atomicExch atomicMin atomicMax atomicInc atomicDec atomicCAS atomicAnd atomicOr atomicXor
__ldg __ldcg __ldca __ldcs __ldlu __ldcv __stwb __stcg __stcs __stwt __popc __popcll __clz __clzll __ffs __ffsll
__brev __brevll __byte_perm __funnelshift_l __funnelshift_r __mul24 __umul24 __mulhi __umulhi __sad __usad
__expf __exp10f __logf __log2f __log10f __powf __sinf __cosf __tanf __sincosf __fdividef __frcp_rn __fsqrt_rn
__frsqrt_rn __saturatef __fmaf_rn __fadd_rn __fsub_rn __fmul_rn __fdiv_rn __dadd_rn __dmul_rn __fma_rn
__float2int_rn __float2int_rz __int2float_rn __float_as_int __int_as_float __float_as_uint __uint_as_float
__half2float __float2half __float2half_rn __nanosleep __trap __brkpt __prof_trigger __isGlobal __isShared
__cvta_generic_to_shared clock clock64 printf malloc free memcpy memset assert
__CUDA_ARCH__ __CUDACC__ __NVCC__ __CUDACC_VER_MAJOR__ __CUDACC_VER_MINOR__ __CUDA_ARCH_LIST__
static_cast reinterpret_cast const_cast dynamic_cast typeid __LINE__ __FILE__ __func__ __FUNCTION__
__PRETTY_FUNCTION__ __COUNTER__ __DATE__ __TIME__ __VA_ARGS__ __VA_OPT__ defined __has_include
__restrict__ __restrict restrict __forceinline__ __noinline__ __inline__ __align__ __launch_bounds__
__grid_constant__ __managed__ __constant__ __shared__ __device__ __global__ __host__ __cluster_dims__
nullptr NULL this true false override final __builtin_expect __builtin_assume __builtin_unreachable
__builtin_assume_aligned __assume __attribute__ __declspec __asm__ asm __volatile__ volatile
""")

Kind = Literal["function", "variable", "parameter", "member", "method", "type", "enumerator", "namespace", "macro",
               "macro parameter", "template parameter"]
_KINDS: dict[str, Kind] = {
    "function_definition": "function", "declaration": "variable", "init_declarator": "variable",
    "condition_clause": "variable", "for_range_loop": "variable", "lambda_capture_specifier": "variable",
    "parameter_declaration": "parameter", "optional_parameter_declaration": "parameter",
    "variadic_parameter_declaration": "parameter", "field_declaration": "member", "type_definition": "type",
    "struct_specifier": "type", "class_specifier": "type", "union_specifier": "type", "enum_specifier": "type",
    "alias_declaration": "type", "concept_definition": "type", "enumerator": "enumerator",
    "namespace_definition": "namespace", "preproc_def": "macro", "preproc_function_def": "macro",
    "preproc_params": "macro parameter", "type_parameter_declaration": "template parameter",
    "optional_type_parameter_declaration": "template parameter"}
# scopes of the variables a block declares (C++'s block scope; a range-for, an if's or a loop's declaration)
_BLOCKS = frozenset({"compound_statement", "for_statement", "for_range_loop", "if_statement", "while_statement",
                     "switch_statement", "catch_clause", "lambda_expression", "function_definition"})
# declaring nodes whose names are held to their block (macros, types and the rest count function-wide)
_HELD_TO_BLOCK = frozenset({"declaration", "init_declarator", "parameter_declaration", "optional_parameter_declaration",
                            "variadic_parameter_declaration", "for_range_loop", "condition_clause",
                            "lambda_capture_specifier"})
# nodes that hold statements: a hole inside one of them is between statements, not inside one
_STATEMENT_HOLDERS = _BLOCKS | {"else_clause", "case_statement", "do_statement", "labeled_statement", "preproc_if",
                                "preproc_ifdef", "preproc_else", "preproc_elif", "preproc_elifdef", "translation_unit"}
_VARIABLE_NODES = frozenset({"declaration", "parameter_declaration", "optional_parameter_declaration",
                             "for_range_loop"})
_UNQUALIFIED = re.compile(rb"(?<![\w.])(?<!->)(?<!::)[A-Za-z_][A-Za-z0-9_]*")
_NAMESPACES = frozenset({"std", "cub", "thrust", "cooperative_groups", "nvcuda", "cutlass", "cute", "c10"})
_NAMESPACE_DECLARATION = re.compile(rb"\bnamespace\s+[A-Za-z_]\w*")

Span = tuple[int, int]


class Declaration(NamedTuple):
    """A name the document declares: the name, its kind, and the declaring node (its type is tree-sitter's:
    `declaration`, `init_declarator`, `parameter_declaration`, `field_declaration`, `preproc_def`, ...)."""

    name: str
    kind: Kind
    node: Node
    name_type: str  # the name node's type: `identifier`, `type_identifier` or `field_identifier`

    @property
    def at(self) -> int:
        """Where the declaring node starts (bytes of the base)."""
        return self.node.start_byte

    def block(self) -> Span | None:
        """The byte range of the block a variable or parameter is held to (its innermost block, loop, `if`,
        lambda or function; a range-for's own); None for the names not held to a block (types, macros,
        functions, members) or declared in no block."""
        if self.node.type not in _HELD_TO_BLOCK:
            return None
        block = self.node if self.node.type == "for_range_loop" else self.node.parent
        while block is not None and block.type not in _BLOCKS:
            block = block.parent
        return (block.start_byte, block.end_byte) if block is not None else None


@dataclass(frozen=True)
class Signature:
    """A function declarator of the document: its name, how many arguments it takes (None: no parameter list),
    and whether it is declared in a body or a parameter list (maybe an object built with arguments there)."""

    name: str
    arity: tuple[int, float] | None
    in_body: bool


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


class SymbolTable:
    """What a document declares and writes, read once from its tree (`root`, over the bytes `data`); the header
    index, the local headers' texts and the CUDA built-ins are its outer scope."""

    def __init__(self, root: Node, data: bytes, headers: HeaderIndex, local_headers: Sequence[str] = ()) -> None:
        self.root, self.data = root, data
        self.headers = headers
        self.local_headers = tuple(local_headers)
        self._namespace_verdicts: dict[str, bool] = {}  # `namespace_only`, per name asked

    # -- declarations

    @cached_property
    def declarations(self) -> tuple[Declaration, ...]:
        """Every name the document declares, once per declaring node (`int x = 1;` declares `x` by its
        `declaration` and by its `init_declarator`)."""
        pattern = "[{}] @d".format(" ".join(f"({kind})" for kind in sorted(DECLARES)))
        found: list[Declaration] = []
        for node in captured(self.root, pattern, "d"):
            kind = _KINDS[node.type]
            if kind == "member" and any(d.type == "function_declarator"
                                        for d in node.children_by_field_name("declarator")):
                kind = "method"
            found.extend(Declaration(text_of(name), kind, node, name.type) for name in declared_by(node))
        return tuple(found)

    @cached_property
    def signatures(self) -> tuple[Signature, ...]:
        """Every function declarator whose name is an identifier (a method's too), with its argument counts."""
        pattern = "(function_declarator declarator: [(identifier) (field_identifier)]) @f"
        found = []
        for declarator in captured(self.root, pattern, "f"):
            scope = declarator.parent
            while scope is not None and scope.type not in ("compound_statement", "parameter_list"):
                scope = scope.parent
            name = declarator.child_by_field_name("declarator")
            found.append(Signature(text_of(name) if name is not None else "", parameter_counts(declarator),
                                   scope is not None))
        return tuple(found)

    @cached_property
    def macros(self) -> frozenset[str]:
        """Names the document defines as macros (object-like or function-like)."""
        return frozenset(d.name for d in self.declarations if d.kind == "macro")

    @cached_property
    def functions(self) -> frozenset[str]:
        """Names the document declares as functions (any scope, overloads of a header's included) or macros."""
        return frozenset(s.name for s in self.signatures) | self.macros

    @cached_property
    def arities(self) -> dict[str, list[tuple[int, float]]]:
        """Functions the document declares outside function bodies, by name: the argument counts each
        declaration takes (overloads: several). Names the headers, the local headers or a function-like macro
        also declare are left out (their overloads and expansions are not seen here)."""
        hidden = {d.name for d in self.declarations if d.node.type == "preproc_function_def"}
        found: dict[str, list[tuple[int, float]]] = {}
        for signature in self.signatures:
            if not signature.in_body and signature.arity is not None:
                found.setdefault(signature.name, []).append(signature.arity)
        return {name: counts for name, counts in found.items()
                if name not in hidden and name not in self.headers and name not in self.local_names}

    @cached_property
    def variables(self) -> frozenset[str]:
        """Names the document declares as variables or parameters outside templates' heads and never writes
        where tree-sitter reads a type (then they may be types after all)."""
        declared = {d.name for d in self.declarations if d.node.type in _VARIABLE_NODES
                    and d.name_type == "identifier"
                    and (d.node.parent is None or d.node.parent.type != "template_parameter_list")}
        return frozenset(declared - self.written_as_type)

    # -- what the document writes

    @cached_property
    def names(self) -> frozenset[str]:
        """Names written in the document (tree-sitter's name nodes, not comments or strings; the words of macro
        bodies too)."""
        return frozenset(names_in(self.root, self.data))

    @cached_property
    def written_as_type(self) -> frozenset[str]:
        return frozenset(text_of(t) for t in captured(self.root, "(type_identifier) @t", "t"))

    @cached_property
    def types_only(self) -> frozenset[str]:
        """Names the document writes only where tree-sitter reads a type (`real` of `typedef float real;`,
        `Index::idx_t`): never a value, so never assigned to."""
        values = frozenset(text_of(v) for v in captured(self.root, "(identifier) @v", "v"))
        return self.written_as_type - values

    @cached_property
    def words(self) -> frozenset[str]:
        """Every identifier-like word of the document, comments included (what a member's name is checked
        against, leniently)."""
        return frozenset(words(self.data))

    @cached_property
    def local_names(self) -> frozenset[str]:
        """Names written in the local headers."""
        found: set[str] = set()
        for header in self.local_headers:
            data = header.encode("utf-8")
            found |= names_in(parser().parse(data).root_node, data)
        return frozenset(found)

    @cached_property
    def local_words(self) -> frozenset[str]:
        return frozenset(word for header in self.local_headers for word in words(header.encode("utf-8")))

    @cached_property
    def _without_namespace_declarations(self) -> bytes:
        return _NAMESPACE_DECLARATION.sub(b" ", self.data)

    def namespace_only(self, name: str) -> bool:
        """Whether `name` is a namespace only, here: a CUDA/C++ one or one the document qualifies with (`std::`,
        `cg::`), and the document never writes it as a value (`float std = sqrt(var);`, a standard deviation),
        a member (`.std`) or outside `namespace`/`using namespace`. Asked per name a fill uses as a value."""
        if name not in self._namespace_verdicts:
            word = name.encode()
            qualifies = name in _NAMESPACES or (word + b"::" in self.data and re.search(  # (a find first:
                rb"(?<![\w:])" + re.escape(word) + rb"::", self.data) is not None)  # most are no qualifiers)
            self._namespace_verdicts[name] = qualifies and re.search(
                rb"(?<![\w:.>])" + re.escape(word) + rb"(?!\w)(?!\s*::)", self._without_namespace_declarations) is None
        return self._namespace_verdicts[name]

    # -- the scope at a hole

    def at(self, hole: int, enclosing: Node | None, hole_line: Span, errors: Sequence[Error],
           names: frozenset[str]) -> HoleScope:
        """The scope at byte `hole` of the document, in the function `enclosing` (None: in no function that
        parses apart from the hole's line `hole_line`); `errors` are the document's parse errors and `names` the
        names it writes that may be used (less a half-typed word)."""
        return HoleScope(self, hole, enclosing, hole_line, tuple(errors), names)


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
                 errors: tuple[Error, ...], names: frozenset[str]) -> None:
        self.table, self.hole, self.enclosing = table, hole, enclosing
        self.hole_line, self.errors, self.names = hole_line, errors, names

    @cached_property
    def _blocks_hold(self) -> bool:
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

    def _scope_of(self, declaration: Declaration, function: Node) -> Span:
        """Where the names a declaration of the hole's function declares are in scope: its block where blocks
        hold and it is held to one, else the whole function."""
        block = declaration.block() if self._blocks_hold else None
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
                lo, hi = self._scope_of(declaration, enclosing)  # (else: anywhere after the hole)
                later.append((name, at if self._blocks_hold else 0, lo, hi))
            elif enclosing.start_byte <= at < self.hole:
                lo, hi = self._scope_of(declaration, enclosing)
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
