"""The checks a completion must pass before the editor shows it: it parses, and every name it uses resolves.

A fill is text that replaces the region text[start:end] of a document the user is typing, so the document
may have errors of its own elsewhere. Each check compares the document *with* the fill (the new text) to the
document *without* it (the base: text[:start] + text[end:]), so only what the fill changes can fail it.
A `CheckContext` is built once per request (it parses the base once) and asked about every candidate.

Parses (`parses`), on tree-sitter-cuda's trees (ERROR and MISSING nodes are "errors"):
- an error that overlaps or touches the fill's span in the new text fails the fill, unless it is exactly an
  error of the base that straddled the hole, shifted by the fill and otherwise left as it was (the hole sits
  in code tree-sitter could not parse anyway). An error the hole itself caused in the base (a half-typed
  line the fill is to finish) is gone once a good fill is in, so it excuses nothing;
- an error elsewhere fails the fill unless it lies inside the statement of an error the base had at the
  corresponding (shifted) place: the user's other half-typed code does not fail a good fill (even where
  the fill changes how tree-sitter recovers from it), while an extra `}` that closes the kernel early does
  (the rest of the body then parses as broken code). "Elsewhere" is the whole file, not only the
  enclosing function: the stray `}` that an unbalanced fill leaves lands at the end of the enclosing
  namespace or file.
- an error that starts on the fill's own line is never excused, nor one in the statement that holds the hole
  (a mid-line fill must finish its line and its statement; a true line that tree-sitter misreads is the rare
  price);
- a `return <value>;` in a `void` function (every kernel) fails: nvcc rejects it, tree-sitter can see it;
  so does what the grammar accepts and no compiler does (`_ill_formed`): a literal suffix no code may define
  (`0x`, `1.x`), a structured binding typed other than `auto` (`float[i] = X[i];`), `++`/`--` applied to a
  value (`++i++`).
The new text is parsed incrementally from the base's tree (tree-sitter reuses what the fill did not touch:
the same verdicts as full parses, at a fraction of the time). Known
limit: a half-typed line right next to the fill (the line before or after) merges with it in tree-sitter's
eyes, and the fill fails; and an unclosed `(` elsewhere can throw tree-sitter's recovery off for the rest
of the file.
Where tree-sitter gives up on much more than the hole's definition (top-level macro calls such as
`DEFINE_OP(float, sum, +);` can make the whole file one ERROR node, which would excuse any fill), the checks
above judge the fill in the top-level definition that holds the hole, parsed alone (`top_level_span`); and a
fill that sits in an excused error must not add an error inside it (`_inner_errors`).

Names (`unknown_names`): every identifier, type or namespace name of the new tree that overlaps the fill
(names inside an ERROR node count too, when tree-sitter labels them so) must be one of:
- declared by the fill itself (declarators of declarations, parameters, for-range loops, structured
  bindings, type aliases, classes, enumerators, macros, template parameters), wherever in the fill;
- a name written in the document outside the region (tree-sitter name nodes, not comments or strings; the
  words of macro bodies too);
- a name from the caller's local header texts (read only in trusted workspaces);
- a name the CUDA/C++ headers declare (`header_names`), a CUDA built-in or a keyword-like name that
  tree-sitter reports as an identifier (`static_cast`, `__LINE__`, ...; `BUILTINS`).
A name used as a variable (`_local_like`: not called, not qualified, not all-caps) is held to its scope: a
name the document declares only as a local or parameter of another function (another kernel's `tid`), or
of this function after the hole, does not resolve unless it is also written outside functions or in this
function before the hole; and from the headers only their globals count (a name declared inside a namespace,
`std::size`, needs a `using namespace`). Within the function, a variable declared before the hole only in
blocks that closed before it (the other branch's `threads`, a finished loop's `col`) is out of scope too,
unless the name is also written outside those blocks; other block scopes are not tracked (lenient). A name the
document writes only as a type (`real` of `typedef float real;`) is not assigned to (`real = 0.f;`, a
declaration that lost its name), and a variable is no type (`(input) out[i]`).
And the other way round (`undeclared`): a name the code after the hole uses like a local variable (not
called, not qualified, not all-caps, not a macro's argument, not ending in `_`) that nothing in scope there
provides was declared by the deleted code: the fill must declare it (`int tid = ...` before `out[tid] = ...`);
and where a half-typed line merges with the next in tree-sitter's eyes, such a name that the word typed before
the cursor is the start of (`const size_t num_bl` before uses of `num_blocks`): the fill must finish it
(where the function does not parse at all, `#ifdef`s through its parameter list, the same by words).
In scope: written outside functions or in this function before the hole (code, not comments or strings; not
a variable of a block closed before the hole), declared in this function after the hole before the use and in a
scope that holds it (another branch's own `val` is not), a function's name, written in another function that does not
declare it (a global from a header the document does not show), or from the headers; another kernel's own
`idx` is not. Only where the enclosing function parses apart from the hole's line (tree-sitter's recovery
hides declarations otherwise). What it rejects of true lines is code after a half-typed line that still
confuses tree-sitter, and names from headers the document includes but that are not at hand.
A call the fill writes or finishes to a function the document declares outside bodies (and the headers,
the local headers and function-like macros do not) must pass a number of arguments one of its declarations
takes (defaults and `...` counted; `args...` skips the call): `find_total(expert)` for a three-parameter
`find_total` does not pass (an overload in a header that is not at hand can make a true call fail it).
Field names after `.`/`->` (field_identifier) are checked leniently: allowed when the word appears anywhere
in the document (comments included), in a local header, in the header index, or is x/y/z/w. Names inside
attributes (`__attribute__((...))`, `[[...]]`) are not checked.

Header index (a `HeaderIndex`, given by the caller): the names a fixed list of CUDA/C++ headers declare
outside function bodies and parameter lists, read from nvcc's preprocessed text by `header_declarations`; built
and cached per nvcc by `dice_lsp.toolchain.header_index`.
"""

from __future__ import annotations

import bisect
import logging
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import cache, cached_property

import tree_sitter_cuda
from tree_sitter import Language, Node, Point, Query, QueryCursor, Tree

from dice_lsp.cuda.functions import parse, parser, top_level_span

LOG = logging.getLogger("dice_lsp.checks")

# ---------------------------------------------------------------------------------------------- results


@dataclass(frozen=True)
class Checks:
    """What a shown completion passed: parses, names resolve, clang's front end finds no new error (`types`,
    `dice_lsp.toolchain.clang`) and, for larger fills, nvcc finds none (`compiles`); None: not run."""

    parses: bool
    names: bool
    compiles: bool | None = None
    types: bool | None = None

    @property
    def passed(self) -> int:
        """How many checks passed (a check not run counts as not passed)."""
        return sum(1 for value in (self.parses, self.names, self.types, self.compiles) if value is True)

    def to_json(self) -> dict[str, bool | None]:
        return {"parses": self.parses, "names": self.names, "types": self.types, "compiles": self.compiles}


@dataclass(frozen=True)
class HeaderIndex:
    """What the CUDA/C++ headers declare, by where a name may be used from.

    globals: declared at global scope (functions, types, variables, enumerators, names a global `using`
        brings in) and macro names: what an unqualified variable of a kernel may be (`stderr`, `cudaSuccess`);
    scoped: declared only inside a namespace (`thrust::reduce`, `std::size`): reachable qualified, called,
        or after a `using namespace`;
    fields: members of classes and structs (after `.` or `->`);
    arities: (name, fewest, most) argument counts of the functions declared at global scope, each over all its
        declarations (`cudaMemcpy` 4-4, `__shfl_down_sync` 3-4, `printf` 1-inf); none for a macro's name.
    Parameters and locals of the headers' own functions are not names a user's code can use, and are left out.
    """

    globals: frozenset[str] = frozenset()
    scoped: frozenset[str] = frozenset()
    fields: frozenset[str] = frozenset()
    arities: frozenset[tuple[str, int, float]] = frozenset()

    @cached_property
    def arity(self) -> dict[str, tuple[int, float]]:
        return {name: (fewest, most) for name, fewest, most in self.arities}

    def __contains__(self, name: object) -> bool:
        """Declared anywhere at namespace scope (globally or in a namespace)."""
        return name in self.globals or name in self.scoped

    def lines(self) -> list[str]:
        """The on-disk form: `name` (global), `::name` (in a namespace only), `.name` (a member), `(name 3 4` (a
        global function's argument counts)."""
        return sorted([*self.globals, *(f"::{n}" for n in self.scoped), *(f".{n}" for n in self.fields),
                       *(f"({n} {low} {high}" for n, low, high in self.arities)])

    @classmethod
    def from_lines(cls, lines: Iterable[str]) -> HeaderIndex:
        found: dict[str, set[str]] = {"": set(), ":": set(), ".": set()}
        arities: set[tuple[str, int, float]] = set()
        for line in lines:
            if line.startswith("("):
                name, low, high = line[1:].split()
                arities.add((name, int(low), float(high)))
            elif line and not line.startswith("#"):
                kind = "." if line[0] == "." else ":" if line.startswith("::") else ""
                found[kind].add(line.lstrip(".:"))
        return cls(frozenset(found[""]), frozenset(found[":"]), frozenset(found["."]), frozenset(arities))


# ------------------------------------------------------------------------------------------------ names

_NAMES = ("identifier", "type_identifier", "namespace_identifier")
_FIELD = "field_identifier"
_WORD = re.compile(rb"[A-Za-z_][A-Za-z0-9_]*")
_VECTOR_FIELDS = frozenset({"x", "y", "z", "w"})
_ATTRIBUTES = frozenset({"attribute_specifier", "attribute_declaration", "attribute", "ms_declspec_modifier"})
# nodes whose `declarator` field(s) declare a name
_DECLARING = frozenset({"declaration", "field_declaration", "parameter_declaration", "optional_parameter_declaration",
                        "variadic_parameter_declaration", "type_definition", "for_range_loop", "function_definition",
                        "init_declarator", "condition_clause"})
# nodes whose `name` field is a declared name
_NAMING = frozenset({"struct_specifier", "class_specifier", "union_specifier", "enum_specifier", "enumerator",
                     "alias_declaration", "namespace_definition", "preproc_def", "preproc_function_def",
                     "optional_type_parameter_declaration", "concept_definition"})
_DECLARATOR_NAMES = frozenset({"identifier", "field_identifier", "type_identifier"})
_DECLARING_QUERY = "[{}] @d".format(" ".join(f"({kind})" for kind in sorted(
    _DECLARING | _NAMING | {"preproc_params", "type_parameter_declaration", "lambda_capture_specifier"})))

# CUDA built-ins (they also come from the header index) and keyword-like names tree-sitter labels as names
def _wordset(text: str) -> frozenset[str]:
    return frozenset(text.split())


# words a half-typed word may be the start of (`ret` of `return`): then it is no name yet (`_document_names`)
KEYWORDS = _wordset("""
alignas alignof auto bool break case catch char class const constexpr const_cast continue decltype default delete
do double dynamic_cast else enum explicit extern false float for friend goto if inline int long mutable namespace
new noexcept nullptr operator private protected public register reinterpret_cast return short signed sizeof
static static_assert static_cast struct switch template this throw true try typedef typename union unsigned using
virtual void volatile while __global__ __device__ __host__ __shared__ __constant__ __forceinline__ __restrict__
""")
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


_UNQUALIFIED = re.compile(rb"(?<![\w.])(?<!->)(?<!::)[A-Za-z_][A-Za-z0-9_]*")


def _unqualified_words(data: bytes) -> Iterator[str]:
    """Identifier-like words of `data` that are not members (`.x`, `->next`) nor qualified (`std::size`)."""
    for match in _UNQUALIFIED.finditer(data):
        yield match.group().decode("ascii")


def words(data: bytes) -> Iterator[str]:
    """Every identifier-like word of `data`."""
    for match in _WORD.finditer(data):
        yield match.group().decode("ascii")


@cache
def _query(pattern: str) -> Query:
    return Query(Language(tree_sitter_cuda.language()), pattern)


def _name_query() -> Query:
    return _query("[(identifier) (type_identifier) (field_identifier) (namespace_identifier) (preproc_arg)] @name")


def names_in(root: Node, data: bytes) -> set[str]:
    """Names tree-sitter found in a parsed text (not in comments or strings), plus the words of macro bodies."""
    found: set[str] = set()
    for node in QueryCursor(_name_query()).captures(root).get("name", []):
        chunk = data[node.start_byte:node.end_byte]
        if node.type == "preproc_arg":
            found.update(words(chunk))
        else:
            found.add(chunk.decode("utf-8", "replace"))
    return found


def _declarator_names(node: Node | None) -> Iterator[Node]:
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


def _declared_by(node: Node) -> Iterator[Node]:
    """Name nodes that `node` itself declares (not its descendants)."""
    if node.type in _DECLARING:
        for declarator in node.children_by_field_name("declarator"):
            yield from _declarator_names(declarator)
    if node.type in _NAMING:
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


# ------------------------------------------------------------------------------------------------ parses

# Suffixes the C++ standard library defines for literals (<chrono>, <string>, <string_view>, <complex>): any
# other suffix that does not start with `_` is not a literal (`0x`, `1.x`: a lexing error for nvcc).
STANDARD_SUFFIXES = frozenset({"h", "min", "s", "ms", "us", "ns", "y", "d", "i", "il", "if", "sv"})


# what a statement of one expression of these kinds does: nothing (a `<<`/`>>` may be a stream's, and is kept)
_NO_EFFECT = frozenset({"identifier", "qualified_identifier", "field_expression", "subscript_expression",
                        "template_function", "binary_expression", "pointer_expression", "sizeof_expression",
                        "number_literal", "string_literal", "concatenated_string", "char_literal", "true", "false",
                        "null", "this"})
_MACRO_NAME = re.compile(r"[A-Z][A-Z0-9_]*")
# tokens an expression cannot end with (`<`/`>` may close a template's head, `:` a label: not here)
_WANTS_OPERAND = frozenset({"=", "+", "-", "*", "/", "%", "^", "|", "&", "||", "&&", "<<", ">>", "?", "(", "[", "!",
                            "~", "==", "!=", "<=", ">=", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "<<=", ">>="})


def _does_nothing(statement: Node) -> bool:
    """Whether an expression statement has no effect (`a[i];`, `x + 1;`, `*p;`, `__syncthreads;`, `a, b;`,
    `x = x;`): a compiler warns about it and no one means it. An all-caps name alone (`NO_DEVICE_CODE;`) is a
    macro that may expand to a statement, and `(void)x;` says on purpose that it does nothing: both are kept."""
    return statement.named_child_count == 1 and _without_effect(statement.named_children[0])


def _without_effect(expression: Node) -> bool:
    expression = _unparenthesised(expression)
    if expression.type == "comma_expression":
        return all(_without_effect(part) for part in expression.named_children)
    if expression.type == "assignment_expression":  # `x = x;`
        return _assigns_itself(expression)
    if expression.type == "identifier" and _MACRO_NAME.fullmatch((expression.text or b"").decode("utf-8", "replace")):
        return False
    operator = expression.child_by_field_name("operator") if expression.type == "binary_expression" else None
    return expression.type in _NO_EFFECT and (operator is None or operator.type not in ("<<", ">>"))


def _loop_update_doing_nothing(expression: Node) -> bool:
    """Whether an expression is a `for` header's update and has no effect (`for (i = 0; i < n; i)`, `...; i + 1)`):
    the loop never moves on by itself, and no one writes it so."""
    loop = expression.parent
    if loop is None or loop.type != "for_statement":
        return False
    update = loop.child_by_field_name("update")
    return update is not None and update.start_byte == expression.start_byte and (
        update.end_byte == expression.end_byte) and _without_effect(expression)


_VALUE_KEYWORDS = frozenset({b"true", b"false", b"nullptr", b"this"})


def _declares_a_keyword(declaration: Node) -> bool:
    """Whether a declaration names a value keyword as its variable (`gflags false;`, which tree-sitter reads as a
    variable `false` of type `gflags`): no compiler takes it. (Type keywords are left out: a macro call such as
    `INSTANTIATE(double);` reads as declaring `double`.)"""
    return any(name.text in _VALUE_KEYWORDS for name in _declared_by(declaration))


def _if_doing_nothing(statement: Node) -> bool:
    """Whether an `if` has an empty statement for its body and no `else` (`if (n == 0);`): what follows runs
    either way, and the compiler warns that the body is empty. (A loop with an empty body may spin on purpose.)"""
    body = statement.child_by_field_name("consequence")
    return (body is not None and body.type == "expression_statement" and body.named_child_count == 0
            and statement.child_by_field_name("alternative") is None)


def _initialised_with_itself(declarator: Node) -> bool:
    """Whether an `init_declarator` reads the variable it declares in its own initialiser (`int n = n * 2;`):
    an uninitialised read, never meant (`sizeof`/`decltype` of it are fine)."""
    name, value = declarator.child_by_field_name("declarator"), declarator.child_by_field_name("value")
    if name is None or value is None or name.type != "identifier":
        return False
    stack = [value]
    while stack:
        node = stack.pop()
        if node.type in ("sizeof_expression", "decltype", "lambda_expression", "qualified_identifier"):
            continue  # (`Config::n` names another `n`)
        if node.type == "identifier" and node.text == name.text:
            return True
        stack.extend(node.named_children)
    return False


def _unparenthesised(node: Node) -> Node:
    while node.type == "parenthesized_expression" and node.named_child_count == 1:
        node = node.named_children[0]
    return node


_SIDE_EFFECTS = frozenset({"call_expression", "update_expression", "assignment_expression"})
_SELF_NONSENSE = frozenset({"=", "-=", "^=", "/=", "%=", "&=", "|="})  # `x op= x`: x, 0 or 1 (`+=`/`*=` mean 2x, x²)


def _assigns_itself(assignment: Node) -> bool:
    """`x = x`, `x = (x)`, `x -= x`, `x ^= x` anywhere (a statement, a `return`, a loop's update): it keeps x
    or sets a constant, and a user writes the constant."""
    left, right = assignment.child_by_field_name("left"), assignment.child_by_field_name("right")
    operator = assignment.child_by_field_name("operator")
    if left is None or right is None or operator is None or operator.type not in _SELF_NONSENSE or left.has_error:
        return False
    return _unparenthesised(left).text == _unparenthesised(right).text and not _has_side_effects(left)


def _has_side_effects(node: Node) -> bool:
    """A call, `++`/`--` or an assignment anywhere in `node` (`a[i++]` twice is two places)."""
    stack = [node]
    while stack:
        node = stack.pop()
        if node.type in _SIDE_EFFECTS:
            return True
        stack.extend(node.named_children)
    return False


_SAME_OPERANDS = frozenset({"<", ">", "<=", ">=", "&&", "||", "-", "^", "/", "%"})  # `x != x` tests for NaN: kept


def _same_operands(expression: Node) -> bool:
    """`tid >= tid`, `a && a`, `x - x`, `0 == 0`: an operator between an operand and itself, a constant
    written the long way (`==`/`!=` only between literals: `x != x` is how code tests for NaN)."""
    left, right = expression.child_by_field_name("left"), expression.child_by_field_name("right")
    operator = expression.child_by_field_name("operator")
    if left is None or right is None or operator is None or left.has_error:
        return False
    left, right = _unparenthesised(left), _unparenthesised(right)
    if left.text != right.text:
        return False
    if operator.type in ("==", "!="):
        return left.type in ("number_literal", "char_literal", "true", "false")
    if left.type == "identifier" and _MACRO_NAME.fullmatch((left.text or b"").decode("utf-8", "replace")):
        return False  # `NUM_GATES - NUM_GATES`: macros, written so in real kernels
    return operator.type in _SAME_OPERANDS and not _has_side_effects(left)  # `f() - f()` may differ


def _assigns_in_initialiser(declarator: Node) -> bool:
    """`int a = b = 0;`, `const int hist = histVal = 0;`: a declaration initialised by assigning another
    variable (legal, written by no one: `a = b = 0;` as a statement stays, and so does storing to memory on
    the way, `T val = buffer[tid] = init;`, which real kernels do)."""
    value = declarator.child_by_field_name("value")
    left = value.child_by_field_name("left") if value is not None and value.type == "assignment_expression" else None
    return left is not None and left.type == "identifier"


def _array_from_value(declarator: Node) -> bool:
    """An array declared with `=` and a value that is neither a braced list nor a string (`int w[4] = mask;`):
    no compiler takes it."""
    name, value = declarator.child_by_field_name("declarator"), declarator.child_by_field_name("value")
    return (name is not None and name.type == "array_declarator" and value is not None
            and value.type not in ("initializer_list", "string_literal", "concatenated_string", "raw_string_literal"))


def _zero_length_local(array: Node) -> bool:
    """`float items[0];` declared in a function: no storage (a zero-length array is a GNU extension for the last
    member of a struct, which this is not)."""
    size = array.child_by_field_name("size")
    owner = array.parent
    while owner is not None and owner.type in ("array_declarator", "init_declarator", "pointer_declarator"):
        owner = owner.parent
    return (size is not None and size.type == "number_literal" and size.text == b"0" and owner is not None
            and owner.type == "declaration" and owner.parent is not None and owner.parent.type == "compound_statement")


_SCALAR_TYPES = frozenset({"primitive_type", "sized_type_specifier"})


def _constant_without_value(declaration: Node) -> bool:
    """A local `const`/`constexpr` scalar or an `auto` variable declared without a value (`const int y;`,
    `auto z;`): every compiler rejects it."""
    if declaration.parent is None or declaration.parent.type != "compound_statement":
        return False
    kind = declaration.child_by_field_name("type")
    if kind is None:
        return False
    words = {(c.children[0].type if c.child_count else c.type) for c in declaration.children
             if c.type in ("type_qualifier", "storage_class_specifier")}
    placeholder = kind.type == "placeholder_type_specifier" and kind.text == b"auto"
    constant = bool(words & {"const", "constexpr"}) and kind.type in _SCALAR_TYPES and "extern" not in words
    if not (placeholder or constant):
        return False
    return any(child.type == "identifier" for child in declaration.children_by_field_name("declarator"))


_INTEGRAL = re.compile(r"(unsigned |signed |long |short )*(int|char|short|long|unsigned|signed|bool|size_t|ssize_t"
                       r"|ptrdiff_t|u?int(8|16|32|64)_t|u?int_fast(8|16|32|64)_t)")
_FRACTION = re.compile(r"(\d+\.\d*|\.\d+|\d+)([eE][-+]?\d+)?[fFlL]?")


def _fraction_into_integer(declaration: Node) -> bool:
    """An integer variable initialised with a literal that has a fraction (`int blocks = 1.8;`): the value the
    code reads is another (clang's -Wliteral-conversion)."""
    kind = declaration.child_by_field_name("type")
    if kind is None or kind.type not in _SCALAR_TYPES or not _INTEGRAL.fullmatch(
            " ".join((kind.text or b"").decode("utf-8", "replace").split())):
        return False
    for declarator in declaration.children_by_field_name("declarator"):
        value = declarator.child_by_field_name("value") if declarator.type == "init_declarator" else None
        literal = (value.text or b"").decode("utf-8", "replace") if value is not None else ""
        if value is not None and value.type == "number_literal" and not literal.lower().startswith("0x") and (
                "." in literal or "e" in literal.lower()) and _FRACTION.fullmatch(literal):
            number = float(literal.rstrip("fFlL"))
            if number != int(number):
                return True
    return False


def _type_alone(node: Node) -> bool:
    """A type written as a statement of its own (`typename OffsetT;`, `int;`): it declares nothing."""
    return node.parent is not None and node.parent.type == "compound_statement"


def _literal_indexed(subscript: Node) -> bool:
    """`10[1]`: a number indexed by a number (one side of `[]` must be a pointer or an array)."""
    argument, indices = subscript.child_by_field_name("argument"), subscript.child_by_field_name("indices")
    index = indices.named_children if indices is not None else []
    return (argument is not None and argument.type == "number_literal" and len(index) == 1
            and index[0].type == "number_literal")


_FORMAT_AT = {"printf": 0, "fprintf": 1, "sprintf": 1, "snprintf": 2}
_CONVERSION = re.compile(r"%(?:%|[-+ #0]*(\*|\d+)?(?:\.(\*|\d+)?)?(?:hh|h|ll|l|j|z|t|L)?([diouxXeEfFgGaAcspn])?)")


def _format_mismatch(call: Node) -> bool:
    """`printf("<%d, %d> %s");`: a printf-family call whose literal format asks for another number of values
    than it is given (undefined behaviour; compilers warn)."""
    function, arguments = call.child_by_field_name("function"), call.child_by_field_name("arguments")
    at = _FORMAT_AT.get((function.text or b"").decode("utf-8", "replace")) if function is not None else None
    if at is None or arguments is None or function is None or function.type != "identifier":
        return False
    values = [a for a in arguments.named_children if a.type != "comment"]
    if len(values) <= at or values[at].type != "string_literal":
        return False
    wanted = 0
    for match in _CONVERSION.finditer((values[at].text or b"").decode("utf-8", "replace")):
        if match.group() == "%%":
            continue
        if match.group(3) is None:
            return False  # not a conversion this reads (a macro's `%` or a typo): no verdict
        wanted += 1 + (match.group(1) == "*") + (match.group(2) == "*")
    return wanted != len(values) - at - 1


def _undefinable_suffix(literal: Node) -> bool:
    """A literal with a suffix no code may define (`0x`, `1.x`: user-defined suffixes start with `_`)."""
    suffix = next((c for c in literal.named_children if c.type == "literal_suffix"), None)
    word = (suffix.text or b"").decode("utf-8", "replace") if suffix is not None else "_"
    return not word.startswith("_") and word not in STANDARD_SUFFIXES


def _typed_binding(binding: Node) -> bool:
    """A structured binding whose type is not `auto` (`float[i] = ...`)."""
    declaration = binding.parent.parent if binding.parent is not None else None
    kind = declaration.child_by_field_name("type") if declaration is not None else None
    return kind is not None and kind.type != "placeholder_type_specifier" and kind.text != b"auto"


def _updates_a_value(update: Node) -> bool:
    """`++`/`--` on a value (`++i++`, `5++`)."""
    argument = update.child_by_field_name("argument")
    return argument is not None and (argument.type in ("number_literal", "string_literal") or (
        argument.type == "update_expression" and argument.children[-1].type in ("++", "--")))


# what `_ill_formed` asks of each kind of node
_ILL_FORMED: dict[str, tuple[Callable[[Node], bool], ...]] = {
    "user_defined_literal": (_undefinable_suffix,),
    "structured_binding_declarator": (_typed_binding,),
    "update_expression": (_updates_a_value,),
    "expression_statement": (_does_nothing,),
    "init_declarator": (_initialised_with_itself, _assigns_in_initialiser, _array_from_value),
    "assignment_expression": (_assigns_itself,),
    "binary_expression": (_same_operands,),
    "array_declarator": (_zero_length_local,),
    "declaration": (_constant_without_value, _fraction_into_integer, _declares_a_keyword),
    "subscript_expression": (_literal_indexed,),
    "call_expression": (_format_mismatch,),
    "primitive_type": (_type_alone,),
    "if_statement": (_if_doing_nothing,),
    "dependent_type": (_type_alone,),
}
for _kind in _NO_EFFECT | {"assignment_expression", "comma_expression", "parenthesized_expression"}:
    _ILL_FORMED[_kind] = (*_ILL_FORMED.get(_kind, ()), _loop_update_doing_nothing)  # any may be a loop's update


def _ill_formed(root: Node, first: int, last: int) -> list[tuple[int, int]]:
    """Byte spans of constructs in the fill that tree-sitter accepts and no C++ compiler does (a literal suffix
    no code may define, a typed structured binding, `++` on a value, an array from a value, a constant or
    `auto` without a value, a number indexed by a number, a type alone); and, compiling at most with a
    warning but never what a user is writing, a statement, a loop update or an `if` that does nothing, a variable
    initialised with itself or with an assignment, an assignment of a variable to itself, an operator between
    an operand and itself (`tid >= tid`, `0 == 0`), a zero-length local array, a fraction into an integer, a
    value keyword declared as a variable (`gflags false;`), a
    printf format that does not match its values (`_ILL_FORMED`: one small predicate each)."""
    spans: list[tuple[int, int]] = []
    for node in _overlapping(root, first, last):  # on a mid-line fill, `1.` before it and `x` from it count
        if any(bad(node) for bad in _ILL_FORMED.get(node.type, ())):
            spans.append((node.start_byte, node.end_byte))
    return spans


def _parameter_counts(declarator: Node) -> tuple[int, float] | None:
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


def _returns_value_from_void(root: Node, first: int, last: int) -> bool:
    """A `return <value>;` of the fill inside a function declared `void` (every kernel): nvcc rejects it."""
    for node in _overlapping(root, first, last):
        if node.type != "return_statement" or node.named_child_count == 0 or node.start_byte < first:
            continue
        owner = node.parent
        while owner is not None and owner.type not in ("function_definition", "lambda_expression"):
            owner = owner.parent
        if owner is None or owner.type != "function_definition":
            continue
        kind, declarator = owner.child_by_field_name("type"), owner.child_by_field_name("declarator")
        if kind is not None and kind.type == "primitive_type" and kind.text == b"void" and (
                declarator is not None and declarator.type == "function_declarator"):
            return True
    return False


def _local_like(node: Node) -> bool:
    """An identifier used the way a local variable is: not called, not qualified, not all-caps (a macro or a
    constant from a header the document does not show), not a macro's argument."""
    name = (node.text or b"").decode("utf-8", "replace")
    parent = node.parent
    if name.upper() == name or name.endswith("_") or parent is None or _macro_argument(node):
        return False
    if parent.type == "call_expression" and parent.child_by_field_name("function") == node:
        return False
    return parent.type not in ("qualified_identifier", "template_function", "template_type", "template_argument_list")


def _macro_argument(node: Node) -> bool:
    """`i` in `CUDA_KERNEL_LOOP(i, n)`: an argument of a call to an all-caps name (a macro may declare it)."""
    arguments = node.parent
    call = arguments.parent if arguments is not None and arguments.type == "argument_list" else None
    callee = call.child_by_field_name("function") if call is not None else None
    name = (callee.text or b"").decode("utf-8", "replace") if callee is not None else ""
    return bool(name) and name.upper() == name and any(c.isalpha() for c in name)


@dataclass(frozen=True)
class _Error:
    start: int  # byte offsets of the ERROR or MISSING node
    end: int
    zone_start: int  # and of the statement it is in (the code a user would call broken)
    zone_end: int


_LEVELS = frozenset({"compound_statement", "translation_unit", "declaration_list", "field_declaration_list",
                     "preproc_if", "preproc_ifdef", "preproc_else", "preproc_elif", "case_statement",
                     "function_definition", "enumerator_list", "initializer_list", "argument_list"})


def _statement(node: Node) -> Node:
    """The statement (or other item of a block, a list or a file) that holds `node`."""
    while node.parent is not None and node.parent.type not in _LEVELS:
        node = node.parent
    return node


def _error(node: Node) -> _Error:
    statement = _statement(node)
    return _Error(node.start_byte, node.end_byte, statement.start_byte, statement.end_byte)


def _errors(root: Node) -> list[_Error]:
    """The outermost ERROR and MISSING nodes (only subtrees that hold an error are visited)."""
    found: list[_Error] = []
    stack = [root]
    while stack:
        node = stack.pop()
        if node.is_missing or node.is_error:
            found.append(_error(node))
        elif node.has_error:
            stack.extend(node.children)
    return found


def _inner_errors(root: Node, low: int, high: int) -> set[tuple[int, int]]:
    """The byte spans of ERROR and MISSING nodes inside another ERROR node that touch the bytes [low, high]
    (ends included, so that a zero-length MISSING node at a boundary counts). Where tree-sitter gives up on a
    large stretch of a file (heavy macros or templates can make one ERROR of a whole file), it still parses the
    code inside it; these are the errors in that code."""
    found: set[tuple[int, int]] = set()
    stack = [(root, False)]
    while stack:
        node, inside = stack.pop()
        if node.end_byte < low or node.start_byte > high or not (node.has_error or node.is_missing):
            continue
        if inside and (node.is_error or node.is_missing):
            found.add((node.start_byte, node.end_byte))
        stack.extend((child, inside or node.is_error) for child in node.children)
    return found


def _point_after(point: Point, data: bytes) -> Point:
    """Where the text `data` ends when it starts at `point` (columns in bytes, as tree-sitter counts them)."""
    lines = data.count(b"\n")
    if lines == 0:
        return Point(point.row, point.column + len(data))
    return Point(point.row + lines, len(data) - data.rfind(b"\n") - 1)


def _fill_offset(data: bytes, first: int, byte: int) -> int:
    """The character offset in the fill (its UTF-8 bytes `data`, starting at byte `first` of the new text) of
    the new text's byte `byte`, clamped to the fill."""
    return len(data[:max(0, min(len(data), byte - first))].decode("utf-8", "replace"))


def _overlapping(root: Node, low: int, high: int) -> Iterator[Node]:
    """Every node that overlaps the bytes [low, high) (a zero-length span: none), outermost first."""
    if high <= low:
        return
    stack = [root]
    while stack:
        node = stack.pop()
        if node.end_byte <= low or node.start_byte >= high:
            continue
        yield node
        stack.extend(reversed(node.children))


@dataclass(frozen=True)
class _Scopes:
    """The document's names as seen from a hole in a function (byte ranges of comments and strings skipped):
    `visible`: written outside functions or in this function before the hole, less the variables this function
    declares before the hole only in blocks closed by then; `elsewhere`: written in other
    functions; `declared_elsewhere`: declared by other functions (locals, parameters) or, only, in those closed
    blocks; `declared_after`: declared in this function at or after the hole, with where (`later`: name, byte
    of the declaration, byte range of its scope); `members`: data members of classes the hole is not in,
    written nowhere else as code outside functions."""

    visible: frozenset[str]
    elsewhere: frozenset[str]
    declared_elsewhere: frozenset[str]
    declared_after: frozenset[str]
    members: frozenset[str] = frozenset()
    later: tuple[tuple[str, int, int, int], ...] = ()

    def declared_for(self, name: str, at: int) -> bool:
        """Whether a declaration after the hole provides `name` to the code at byte `at`: it comes before it, in
        a scope that holds it (the `val` another branch declares for itself is not this one's)."""
        return any(n == name and start <= at and lo <= at < hi for n, start, lo, hi in self.later)


# scopes of the variables a block declares (C++'s block scope; a range-for, an if's or a loop's declaration)
_BLOCKS = frozenset({"compound_statement", "for_statement", "for_range_loop", "if_statement", "while_statement",
                     "switch_statement", "catch_clause", "lambda_expression", "function_definition"})
# nodes that hold statements: a hole inside one of them is between statements, not inside one
_STATEMENT_HOLDERS = _BLOCKS | {"else_clause", "case_statement", "do_statement", "labeled_statement", "preproc_if",
                                "preproc_ifdef", "preproc_else", "preproc_elif", "preproc_elifdef", "translation_unit"}
# declaring nodes whose names are held to their block (macros, types and the rest count function-wide)
_SCOPED = frozenset({"declaration", "init_declarator", "parameter_declaration", "optional_parameter_declaration",
                     "variadic_parameter_declaration", "for_range_loop", "condition_clause",
                     "lambda_capture_specifier"})


def _outermost(nodes: list[Node]) -> list[tuple[int, int]]:
    """The byte spans of `nodes` that lie inside none of the others, in order (sorted, not overlapping)."""
    spans: list[tuple[int, int]] = []
    for node in sorted(nodes, key=lambda n: n.start_byte):
        if not spans or node.start_byte >= spans[-1][1]:
            spans.append((node.start_byte, node.end_byte))
    return spans


def _within(spans: list[tuple[int, int]], at: int) -> bool:
    """Whether byte `at` lies in one of `spans` (sorted, not overlapping): a bisection, not a scan."""
    index = bisect.bisect_right(spans, (at, float("inf"))) - 1
    return index >= 0 and spans[index][0] <= at < spans[index][1]


def _block_of(node: Node, function: Node, blocks_hold: bool = True) -> tuple[int, int]:
    """The byte range where the variables `node` declares are in scope (the function's, for other names, and where
    tree-sitter's recovery runs through the function beyond the hole's line: its blocks may not be the code's)."""
    if node.type not in _SCOPED or not blocks_hold:
        return function.start_byte, function.end_byte
    block = node if node.type == "for_range_loop" else node.parent
    while block is not None and block.type not in _BLOCKS:
        block = block.parent
    return (block.start_byte, block.end_byte) if block is not None else (function.start_byte, function.end_byte)


def _words_outside(data: bytes, skipped: list[tuple[int, int]]) -> set[str]:
    """The unqualified words of `data` outside the byte ranges `skipped` (which may overlap)."""
    found: set[str] = set()
    at = 0
    for lo, hi in sorted(skipped):
        found.update(_unqualified_words(data[at:max(at, lo)]))
        at = max(at, hi)
    found.update(_unqualified_words(data[at:]))
    return found


_VALUE_PLACES = frozenset({"argument_list", "binary_expression", "assignment_expression", "return_statement",
                           "expression_statement", "subscript_argument_list", "parenthesized_expression",
                           "conditional_expression", "unary_expression", "field_expression", "initializer_list"})


def _as_value(node: Node) -> bool:
    """An identifier where a value is read (an argument, an operand, a returned value, an initialiser)."""
    parent = node.parent
    if node.type != "identifier" or parent is None:
        return False
    if parent.type == "init_declarator":
        return parent.child_by_field_name("value") == node
    return parent.type in _VALUE_PLACES


_CUDA_API = re.compile(r"(cuda|cu[A-Z]|__|atomic)")  # runtime, driver, intrinsics: what projects do not overload
_VARIABLES_QUERY = "[(declaration) (parameter_declaration) (optional_parameter_declaration) (for_range_loop)] @d"


def _as_type(node: Node) -> bool:
    """A type name where only a type may be: a cast's (`(T) x`) or a declaration's (`T x;`)."""
    parent = node.parent
    if node.type != "type_identifier" or parent is None:
        return False
    if parent.type == "type_descriptor":
        return parent.parent is not None and parent.parent.type == "cast_expression"
    return parent.type == "declaration" and parent.child_by_field_name("type") == node


_PROSE = re.compile(rb'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"', re.S)  # comments and strings, by regex


def _column_zero_span(data: bytes, at: int) -> tuple[int, int] | None:
    """Where braces cannot say (`#if`s through a parameter list), the definition around byte `at` as code is laid
    out: from the last line before it that starts with a word at column 0 to the first `}` at column 0 after it."""
    start = max((m.start() for m in re.finditer(rb"^[A-Za-z_]", data[:at], re.M)), default=None)
    end = re.compile(rb"^\}", re.M).search(data, at)
    return (start, end.end()) if start is not None and end is not None else None


def _open_blocks_text(data: bytes) -> bytes:
    """`data` (code from a definition's start) without the blocks that open and close within it: what is still
    in scope at its end, by braces alone."""
    opened: list[int] = []
    closed: list[tuple[int, int]] = []
    for match in re.finditer(rb"[{}]", data):
        if match.group() == b"{":
            opened.append(match.start())
        elif opened:
            start = opened.pop()
            while closed and closed[-1][0] > start:  # blocks inside this one
                closed.pop()
            closed.append((start, match.end()))
    kept, at = [], 0
    for start, end in closed:
        kept.append(data[at:start])
        at = end
    return b" ".join([*kept, data[at:]])


def _assigned_to(node: Node) -> bool:
    """An identifier that is assigned to (`x = ...`, `ns::x = ...`)."""
    parent = node.parent
    if node.type != "identifier" or parent is None:
        return False
    if parent.type == "qualified_identifier" and parent.child_by_field_name("name") == node:
        node, parent = parent, parent.parent
    return parent is not None and parent.type == "assignment_expression" and parent.child_by_field_name("left") == node


_NAMESPACES = frozenset({"std", "cub", "thrust", "cooperative_groups", "nvcuda", "cutlass", "cute", "c10"})
_NAMESPACE_DECLARATION = re.compile(rb"\bnamespace\s+[A-Za-z_]\w*")


_TYPED_BYTES = re.compile(rb"(?<!\w)[A-Za-z_]\w*\Z")  # the word typed before the cursor
# a declaration's head typed so far: type words (qualified, templated, pointers) and the start of the name
_DECLARATION_HEAD = re.compile(r"\s*(?:[A-Za-z_][\w:]*(?:<[^;{}()]*>)?[\s*&]+)+[A-Za-z_]\w*")
_NOT_A_TYPE = frozenset({"return", "case", "goto", "else", "do", "delete", "throw", "new", "sizeof", "using",
                         "co_return", "co_yield", "co_await", "template", "typename"})


class CheckContext:
    """One request's document and region, parsed once; ask it about each candidate fill.

    `headers`: the header index (`header_names`); `local_headers`: texts of the workspace's own headers that
    the document includes (the caller reads them only in a trusted workspace).
    """

    def __init__(self, text: str, start: int, end: int, headers: HeaderIndex = HeaderIndex(),
                 local_headers: Sequence[str] = ()) -> None:
        if not 0 <= start <= end <= len(text):
            raise ValueError(f"bad region [{start}, {end}) for a text of {len(text)} characters")
        self.text, self.start, self.end = text, start, end
        self.headers = headers
        self.local_headers = tuple(local_headers)
        self.base = text[:start] + text[end:]
        self._prefix = text[:start].encode("utf-8")
        self._suffix = text[end:].encode("utf-8")
        self._base_data = self._prefix + self._suffix
        self._hole = len(self._prefix)  # the hole's byte offset in the base
        self._hole_point = _point_after(Point(0, 0), self._prefix)
        # the base is the request's text itself when the region is empty (the editor's case): parsed once
        self._base_tree = parse(self.base).tree if self.base == text else parser().parse(self._base_data)
        self._base_errors = _errors(self._base_tree.root_node)
        self._last: tuple[str, Tree, bytes] | None = None
        self._alone_contexts: dict[tuple[int, int], CheckContext] = {}
        self._namespace_verdicts: dict[str, bool] = {}  # `_namespace_only`, per name asked
        self._alone_for: dict[str, CheckContext | None] = {}  # per fill: its definition alone (`_alone`)

    # -- parsing

    def _parse(self, fill: str) -> tuple[Tree, bytes]:
        """The new text's tree (incrementally from the base's) and the fill's bytes; the last one is kept."""
        if self._last is not None and self._last[0] == fill:
            return self._last[1], self._last[2]
        data = fill.encode("utf-8")
        tree = self._base_tree.copy()
        tree.edit(start_byte=self._hole, old_end_byte=self._hole, new_end_byte=self._hole + len(data),
                  start_point=self._hole_point, old_end_point=self._hole_point,
                  new_end_point=_point_after(self._hole_point, data))
        new = parser().parse(self._prefix + data + self._suffix, tree)
        self._last = (fill, new, data)
        return new, data

    def _placed(self, fill: str) -> tuple[Node, bytes, int, int]:
        """The new text's root, the fill's bytes, and the byte range [first, last) the fill takes in it."""
        tree, data = self._parse(fill)
        return tree.root_node, data, self._hole, self._hole + len(data)

    def _shift(self, byte: int, size: int, end: bool) -> int:
        """A base byte offset in the new text: after the hole it moves by the fill's size (an end offset at
        the hole stays before the fill, a start offset moves after it)."""
        return byte + size if (byte > self._hole or (byte == self._hole and not end)) else byte

    def _shifted(self, error: _Error, size: int) -> tuple[int, int]:
        return self._shift(error.start, size, False), self._shift(error.end, size, True)

    def _zone(self, error: _Error, size: int) -> tuple[int, int]:
        return self._shift(error.zone_start, size, False), self._shift(error.zone_end, size, True)

    @cached_property
    def _lost(self) -> list[_Error]:
        """The base's errors the hole sits in."""
        return [e for e in self._base_errors if e.start < self._hole < e.end]

    @cached_property
    def _base_span(self) -> tuple[int, int] | None:
        return top_level_span(self._base_data, self._hole) if self._lost else None

    def _alone(self, fill: str) -> CheckContext | None:
        """The region judged in the top-level definition that holds it, parsed alone, when the base's error
        around the hole spans more than that definition (tree-sitter lost elsewhere); None when the
        document's tree will do. The definition's span is the larger of the ones found in the base and in the
        text with `fill` in (whose braces may open or close it)."""
        if not self._lost:
            return None
        if fill in self._alone_for:
            return self._alone_for[fill]
        self._alone_for[fill] = alone = self._alone_of(fill)
        return alone

    def _alone_of(self, fill: str) -> CheckContext | None:
        data = fill.encode("utf-8")
        spans = [] if self._base_span is None else [self._base_span]
        filled = top_level_span(self._prefix + data + self._suffix, self._hole)
        if filled is not None:  # in the base's offsets: a definition the fill closes ends at the hole
            spans.append((filled[0], max(self._hole, filled[1] - len(data))))
        if not spans:
            return None
        low, high = min(span[0] for span in spans), max(span[1] for span in spans)
        if not any(e.start < low or e.end > high for e in self._lost):
            return None
        if (low, high) not in self._alone_contexts:
            prefix = self._prefix[low:].decode("utf-8", "replace")
            text = prefix + self._suffix[:high - self._hole].decode("utf-8", "replace")
            self._alone_contexts[(low, high)] = CheckContext(text, len(prefix), len(prefix))
        return self._alone_contexts[(low, high)]

    def parses(self, fill: str) -> bool:
        """Whether the document with `fill` in the region parses with no error the fill is to blame for."""
        if (alone := self._alone(fill)) is not None:
            return alone.parses(fill)
        tree, data = self._parse(fill)
        size = len(data)
        first, last = self._hole, self._hole + size
        straddling = {self._shifted(e, size) for e in self._base_errors if e.start < self._hole < e.end}
        zones = [self._zone(e, size) for e in self._base_errors  # not the hole's own statement: the fill finishes it
                 if not e.zone_start <= self._hole <= e.zone_end]
        new = self._prefix + data + self._suffix
        line_start = new.rfind(b"\n", 0, first) + 1
        for error in _errors(tree.root_node):
            if error.end >= first and error.start <= last:  # on the fill: only garbage it sits in, left as it was,
                own_line = line_start <= error.start  # never garbage that starts on the fill's own line
                if (error.start, error.end) not in straddling or own_line:
                    return False
                if self._breaks_inside(tree.root_node, first, last):  # and the code it sits in not broken more
                    return False
            elif not any(low <= error.start and error.end <= high for low, high in zones):  # elsewhere: only old
                return False
        root = tree.root_node
        return (not _returns_value_from_void(root, first, last) and not _ill_formed(root, first, last)
                and self._takes_next_line(root, data) is None)

    def _takes_next_line(self, root: Node, data: bytes) -> tuple[int, int] | None:
        """For a one-line fill on an empty line that ends wanting an operand (`int n =`, `x +`, `f(`): the byte
        span of that last token when the fill's statement takes in the next line of code, which in the base is a
        statement of its own with no error (`int64_t end =` then `seg.offset = cur;` parses as one
        declaration); None otherwise (a next line the base could not place, such as the rest of a call split
        over lines, may be what the fill was to open)."""
        first, last = self._hole, self._hole + len(data)
        if b"\n" in data or self._prefix[self._prefix.rfind(b"\n") + 1:].strip():
            return None
        leaves = [n for n in _overlapping(root, first, last)
                  if n.child_count == 0 and not n.is_missing and n.end_byte <= last and n.type != "comment"]
        end = max(leaves, key=lambda n: n.end_byte, default=None)
        if end is None or end.type not in _WANTS_OPERAND:
            return None
        following = self._suffix.find(b"\n")  # the fill has one line: the next line starts after this break
        if following < 0 or _statement(end).end_byte <= last + following:
            return None
        code = re.search(rb"\S", self._suffix[following + 1:])
        if code is None:
            return None
        below = self._base_tree.root_node.descendant_for_byte_range(*(2 * [self._hole + following + 1 + code.start()]))
        statement = _statement(below) if below is not None else None
        if statement is None or statement.has_error or statement.is_error:
            return None
        return end.start_byte, end.end_byte

    def _breaks_inside(self, root: Node, first: int, last: int) -> bool:
        """Whether the fill (bytes [first, last) of the new text `root`) sits in an ERROR node with an error
        inside it that the base does not have, in the block (or other statement level) the fill is in."""
        size = last - first
        block = root.descendant_for_byte_range(first, max(first, last - 1))
        while block is not None and block.parent is not None and block.type not in _LEVELS:
            block = block.parent
        low, high = (first, last) if block is None else (block.start_byte, block.end_byte)
        old = {(self._shift(lo, size, False), self._shift(hi, size, True)) for lo, hi in self._base_inner_errors}
        return bool(_inner_errors(root, low, high) - old)

    @cached_property
    def _base_inner_errors(self) -> set[tuple[int, int]]:
        return _inner_errors(self._base_tree.root_node, 0, len(self._base_data))

    # -- names

    @cached_property
    def _document_names(self) -> frozenset[str]:
        """Names written in the document; not the word the user is typing at the hole when it is the start of a
        longer name of the document or of a keyword and written nowhere else (`return num_examp` with
        `num_examples` in scope, finished as `num_examp(ptr, idx)`, and `ret` finished as `ret.copyTo(dst)`,
        must not pass on their own half-typed word; a whole name typed once, such as a macro from a header
        not read here, stays)."""
        found = frozenset(names_in(self._base_tree.root_node, self._base_data))
        typing = re.search(rb"[A-Za-z_]\w*$", self._prefix)
        if typing is None or self._suffix[:1].isalnum() or self._suffix[:1] == b"_":
            return found
        word = typing.group().decode("utf-8", "replace")
        once = len(re.findall(rb"(?<!\w)" + re.escape(typing.group()) + rb"(?!\w)", self._base_data)) == 1
        started = any(name.startswith(word) and name != word for name in (*found, *KEYWORDS))
        return found - {word} if once and started else found

    @cached_property
    def _document_words(self) -> frozenset[str]:
        return frozenset(words(self._base_data))

    @cached_property
    def _local_names(self) -> frozenset[str]:
        found: set[str] = set()
        for header in self.local_headers:
            data = header.encode("utf-8")
            found |= names_in(parser().parse(data).root_node, data)
        return frozenset(found)

    @cached_property
    def _local_words(self) -> frozenset[str]:
        return frozenset(word for header in self.local_headers for word in words(header.encode("utf-8")))

    @cached_property
    def _enclosing(self) -> Node | None:
        """The base's function definition around the hole, when it parses apart from the hole's line (None
        otherwise: tree-sitter's recovery would hide or invent declarations)."""
        function = self._base_tree.root_node.descendant_for_byte_range(self._hole, self._hole)
        while function is not None and function.type != "function_definition":
            function = function.parent
        if function is None:
            return None
        line_start, line_end = self._hole_line
        if any(function.start_byte <= e.start and e.end <= function.end_byte and not (
                line_start <= e.start and e.end <= line_end + 1) for e in self._base_errors):
            return None
        return function

    @cached_property
    def _hole_line(self) -> tuple[int, int]:
        """The byte range of the hole's line in the base (its start, and its end before the line break)."""
        start = self._base_data.rfind(b"\n", 0, self._hole) + 1
        end = self._base_data.find(b"\n", self._hole)
        return start, len(self._base_data) if end < 0 else end

    @property
    def needed(self) -> frozenset[str]:
        """Names the code after the hole uses that nothing in scope declares (`_needed`): the hole's code most
        likely declared them."""
        return self._needed

    @cached_property
    def _needed(self) -> frozenset[str]:
        """Names the code after the hole (in its function) uses like local variables that nothing in scope
        there provides: the deleted code declared them, so a fill must (`int tid = ...` before `out[tid] = ...`).

        Provided: a name written outside functions or in this function before the hole (code, not comments or
        strings; not a variable of a block closed by then), declared in this function after the hole before the
        use and in a scope that holds it, written in another function without being declared
        there (a global from a header the document does not show), a global of the headers (any of their names
        after a `using namespace`), a name of the local headers. A
        name another function declares for itself (its `idx`) provides nothing here."""
        function = self._enclosing
        if function is None:  # no function, or tree-sitter's recovery hides declarations: too unsure
            return self._typed_declaration()
        if self._typed_line_breaks(function):
            return self._needed_without_typed_line()
        scopes = self._scopes
        needed = set()
        stack = [function]
        while stack:
            node = stack.pop()
            if node.end_byte <= self._hole:
                continue
            if node.type == "identifier" and node.start_byte >= self._hole and _local_like(node):
                name = (node.text or b"").decode("utf-8", "replace")
                if not (name in scopes.visible or scopes.declared_for(name, node.start_byte)
                        or name in self.headers.globals or (self._uses_namespace and name in self.headers)
                        or name in BUILTINS
                        or name in self._local_names
                        or (name in scopes.elsewhere and name not in scopes.declared_elsewhere)):
                    needed.add(name)
            stack.extend(node.children)
        return frozenset(needed)

    def _typed_line_breaks(self, function: Node) -> bool:
        """Whether text typed before the cursor goes with an error in or around the function (inside it, only on
        the hole's line, as `_enclosing` allows; around it, recovery's ERROR node that holds the rest of the
        file), or reads as one statement with the next line: a half-typed `for (size_t iter = 0; ` takes the
        next lines into its header, `__shared__ ` makes the next line's declaration its own, and the
        declarations there and the functions after it are no longer seen as such."""
        line_start = self._hole_line[0]
        if not self._base_data[line_start:self._hole].strip():
            return False
        if any(e.start < function.end_byte and function.start_byte < e.end for e in self._base_errors):
            return True
        line_end = self._hole_line[1]
        node = self._base_tree.root_node.descendant_for_byte_range(self._hole, self._hole)
        while node is not None and node != function:  # the typed text and the next line read as one statement
            if line_start <= node.start_byte < self._hole < node.end_byte and line_end < node.end_byte - 1:
                return True
            node = node.parent
        return False

    def _needed_without_typed_line(self) -> frozenset[str]:
        """`_needed` as the base with the hole's typed text blanked out sees it, less the names that text writes
        (the loop variable the typed header declares is not the fill's to declare)."""
        line_start = self._hole_line[0]
        if self._typed_line_blanked._enclosing is None:  # blanked, the function parses no better: by words
            return self._typed_declaration()
        typed = set(re.findall(rb"[A-Za-z_]\w*", self._base_data[line_start:self._hole]))
        return frozenset(name for name in self._typed_line_blanked._needed if name.encode() not in typed)

    @cached_property
    def _typed_line_blanked(self) -> CheckContext:
        """The checks of the base with the text typed on the hole's line blanked out (same bytes: offsets hold)."""
        line_start = self._hole_line[0]
        blanked = (self._prefix[:line_start] + b" " * (self._hole - line_start)).decode("utf-8", "replace")
        return CheckContext(blanked + self._suffix.decode("utf-8", "replace"), len(blanked), len(blanked),
                            self.headers, self.local_headers)

    def _typed_declaration(self) -> frozenset[str]:
        """Where a half-typed line merges with the next in tree-sitter's eyes (`const size_t num_bl` before
        `const size_t grid = ...`), the function does not parse apart from the hole's line and `_needed` cannot
        tell. Then: the names the code after the hole needs, as the base with that line's typed text blanked out
        sees them (`_typed_line_blanked`), that the word typed before the cursor is the start of
        (`num_blocks`): the user is typing their declaration, so the fill must finish it (`_size = 0;`, which
        declares `num_bl_size`, does not)."""
        line_start = self._hole_line[0]
        typed = _TYPED_BYTES.search(self._base_data, line_start, self._hole)
        if typed is None:
            return frozenset()
        word = typed.group().decode("ascii")
        if self._typed_line_blanked._enclosing is None:  # no parse even without the typed text (macro-laden)
            return self._typed_declaration_by_words(line_start, word)
        return frozenset(name for name in self._typed_line_blanked._needed if name.startswith(word) and name != word)

    def _typed_declaration_by_words(self, line_start: int, word: str) -> frozenset[str]:
        """`_typed_declaration` where the function does not parse at all (OpenMM's kernels, `#ifdef`s through
        their parameter lists; tree-sitter cannot say what is declared where): by words. The line typed so far is
        a declaration's head (`real tempEn`, `__shared__ real fr`), and the code after the hole, in the
        definition that holds it, uses exactly one longer name that `word` starts, written nowhere before this
        line and not declared where it is first written (`energy += tempEnergy;`): that is the name being typed,
        so the fill must finish it. (Before this line, only the text of blocks still open counts: the same name
        declared in an earlier, closed block is another variable.)"""
        head = self._base_data[line_start:self._hole].decode("utf-8", "replace")
        if _DECLARATION_HEAD.fullmatch(head) is None or head.split()[0] in _NOT_A_TYPE:
            return frozenset()
        span = top_level_span(self._base_data, self._hole) or _column_zero_span(self._base_data, self._hole)
        if span is None:
            return frozenset()
        after = _PROSE.sub(b" ", self._base_data[self._hole:span[1]])
        before = _open_blocks_text(_PROSE.sub(b" ", self._base_data[span[0]:line_start]))
        names = {name for name in words(after) if name.startswith(word) and name != word}
        found = [name for name in names if name not in self.headers.globals and not re.search(
            rb"(?<!\w)" + name.encode() + rb"(?!\w)", before)]
        if len(found) != 1:
            return frozenset()
        first = re.search(rb"(?<![\w.>:])" + found[0].encode() + rb"(?!\w)", after)
        statement = after[:first.start()].rsplit(b";", 1)[-1].rsplit(b"}", 1)[-1].rsplit(b"{", 1)[-1] if first else b""
        if first is None or _DECLARATION_HEAD.fullmatch(statement.decode("utf-8", "replace") + "x"):
            return frozenset()  # written first in a declaration of its own: not the typed one
        return frozenset(found)

    @cached_property
    def _block_names(self) -> frozenset[str]:
        """Names declared in the block the hole is in (its own statements; the parameters too when the block is
        the function's body): a fill that declares one again does not compile."""
        function = self._enclosing
        if function is None:
            return frozenset()
        block = self._base_tree.root_node.descendant_for_byte_range(self._hole, self._hole)
        while block is not None and block.type != "compound_statement" and block != function:
            block = block.parent
        if block is None or block.type != "compound_statement":
            return frozenset()
        names = {(n.text or b"").decode("utf-8", "replace") for child in block.named_children
                 if child.type == "declaration" and not child.start_byte <= self._hole <= child.end_byte
                 for n in _declared_by(child)}  # not the half-typed line's own (`int ` + the next line)
        if block == function.child_by_field_name("body"):
            declarator = function.child_by_field_name("declarator")
            while declarator is not None and declarator.type != "function_declarator":
                declarator = declarator.child_by_field_name("declarator")
            parameters = declarator.child_by_field_name("parameters") if declarator is not None else None
            for parameter in parameters.named_children if parameters is not None else ():
                names.update((n.text or b"").decode("utf-8", "replace") for n in _declared_by(parameter))
        return frozenset(names)

    def redeclared(self, fill: str) -> list[tuple[int, str]]:
        """Names a statement of the fill declares that its block (or the function's parameters) already has,
        as (offset in the fill, name): `int n = ...` in a kernel that takes `n`."""
        if not self._block_names:
            return []
        root, data, first, last = self._placed(fill)
        found = []
        for node in _overlapping(root, first, last):
            parent = node.parent
            if node.type != "declaration" or parent is None or (
                    parent.type != "compound_statement" or parent.start_byte >= first):
                continue  # only statements of the hole's own block
            for name in _declared_by(node):  # names the fill writes (`int ` typed before a mid-line fill too)
                text = (name.text or b"").decode("utf-8", "replace")
                if first <= name.start_byte < last and text in self._block_names:
                    found.append((_fill_offset(data, first, name.start_byte), text))
        return found

    def declarations(self, fill: str) -> list[tuple[int, str]]:
        """Names the fill's own statements declare in the hole's block, as (offset in the fill, name):
        `int tid = ...` gives `tid`; a loop's or a lambda's names do not count (they live in their own scope)."""
        root, data, first, last = self._placed(fill)
        found = []
        for node in _overlapping(root, first, last):
            parent = node.parent
            if node.type != "declaration" or parent is None or parent.type != "compound_statement":
                continue
            for name in _declared_by(node):
                if first <= name.start_byte < last:
                    text = (name.text or b"").decode("utf-8", "replace")
                    found.append((_fill_offset(data, first, name.start_byte), text))
        return found

    def undeclared(self, fill: str) -> list[str]:
        """Names the code after the hole needs declared that the fill does not declare (see `_needed`)."""
        if not self._needed:
            return []
        root, _, first, last = self._placed(fill)
        declared: set[str] = set()
        for node in _overlapping(root, first, last):
            declared.update((name.text or b"").decode("utf-8", "replace") for name in _declared_by(node))
            if node.type == "identifier" and _macro_argument(node):  # a macro may declare it
                declared.add((node.text or b"").decode("utf-8", "replace"))
        return sorted(self._needed - declared)

    @cached_property
    def _scopes(self) -> _Scopes:
        """Where the document's names are written and declared, seen from the hole (see `_Scopes`). Queries
        and a regex rather than a walk in Python: this runs once per completion, on files of thousands of
        lines."""
        enclosing = self._enclosing
        if enclosing is None:
            return _Scopes(frozenset(), frozenset(), frozenset(), frozenset())
        root, data = self._base_tree.root_node, self._base_data
        functions = _outermost(QueryCursor(_query("(function_definition) @f")).captures(root).get("f", []))
        others = [(lo, hi) for lo, hi in functions if not lo <= self._hole < hi]  # not the one around the hole
        after = (self._hole, enclosing.end_byte)
        prose = QueryCursor(_query("[(comment) (string_literal) (raw_string_literal) (char_literal)] @p"))
        prose_ranges = [(n.start_byte, n.end_byte) for n in prose.captures(root).get("p", [])]
        # parameter lists outside the function around the hole (prototypes, function-pointer types): their names
        # are in no scope the hole can see
        around = [(lo, hi) for lo, hi in functions if lo <= self._hole < hi] or [
            (enclosing.start_byte, enclosing.end_byte)]
        lists = [(lo, hi) for lo, hi in _outermost(QueryCursor(_query("(parameter_list) @l")).captures(root).get(
            "l", [])) if not around[0][0] <= lo < around[0][1]]
        visible = _words_outside(data, [*others, after, *prose_ranges, *lists])
        ends = [(0, 0), *others]  # the code between other functions (and before the first, after the last)
        gaps = [(ends[i][1], lo) for i, (lo, _) in enumerate([*others, (len(data), len(data))])]
        elsewhere = _words_outside(data, [*gaps, *prose_ranges])
        declared_elsewhere: set[str] = set()
        declared_after: set[str] = set()
        later: list[tuple[str, int, int, int]] = []
        closed: dict[str, list[tuple[int, int]]] = {}  # declared before the hole in a block closed by then
        open_before: set[str] = set()  # declared before the hole in a scope that holds it
        line_start, line_end = self._hole_line
        blocks_hold = not any(e.start < enclosing.end_byte and enclosing.start_byte < e.end and not (
            line_start <= e.start and e.end <= line_end + 1) for e in self._base_errors) and not (
            self._statement_runs_on(enclosing, line_end))  # else: function-wide
        for node in QueryCursor(_query(_DECLARING_QUERY)).captures(root).get("d", []):
            names = {(n.text or b"").decode("utf-8", "replace") for n in _declared_by(node)}
            if node.type == "function_definition":  # a function's name is the file's, wherever it is defined
                visible |= names
            elif _within(others, node.start_byte) or _within(lists, node.start_byte):
                declared_elsewhere |= names
            elif after[0] <= node.start_byte < after[1]:
                declared_after |= names
                lo, hi = _block_of(node, enclosing, blocks_hold)  # (else: anywhere after the hole, as before)
                later.extend((name, node.start_byte if blocks_hold else 0, lo, hi) for name in names)
            elif enclosing.start_byte <= node.start_byte < self._hole:
                lo, hi = _block_of(node, enclosing, blocks_hold)
                for name in names:
                    if hi <= line_start:  # (a block that ends on the hole's line may go on there)
                        closed.setdefault(name, []).append((lo, hi))
                    else:
                        open_before.add(name)
        closed_only = set(closed) - open_before
        if closed_only:  # such a name is no longer in scope, unless it is also written outside those blocks
            blocks = [block for name in closed_only for block in closed[name]]
            closed_only -= _words_outside(data, [*others, after, *prose_ranges, *lists, *blocks])
            visible -= closed_only
            declared_elsewhere |= closed_only
        return _Scopes(frozenset(visible), frozenset(elsewhere), frozenset(declared_elsewhere),
                       frozenset(declared_after), self._members(functions, [*others, after, *prose_ranges]),
                       tuple(later))

    def _statement_runs_on(self, function: Node, line_end: int) -> bool:
        """Whether the hole is inside a statement that goes on past its line (a call whose `(` the lines above
        opened, a half-typed line read with the next): tree-sitter then reads the code below as part of it, and its
        blocks there are not the code's."""
        node = self._base_tree.root_node.descendant_for_byte_range(self._hole, self._hole)
        while node is not None and node != function:
            if node.type not in _STATEMENT_HOLDERS and node.start_byte < self._hole and node.end_byte > line_end:
                return True
            node = node.parent
        return False

    def _members(self, functions: list[tuple[int, int]], skipped: list[tuple[int, int]]) -> frozenset[str]:
        """Data members of classes the hole is not in, that no code outside those classes and outside functions
        writes (a global of the same name): not variables at the hole. Empty where the hole's function may see
        members of classes it is not written in (an out-of-line `Foo::bar`, a class with base classes)."""
        enclosing = self._enclosing
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
        root, data = self._base_tree.root_node, self._base_data
        bodies = [n for n in QueryCursor(_query("(field_declaration_list) @b")).captures(root).get("b", [])
                  if not n.start_byte <= self._hole < n.end_byte
                  and not any(lo <= n.start_byte < hi for lo, hi in functions)]
        members: set[str] = set()
        for body in bodies:
            for child in body.named_children:
                if child.type == "field_declaration" and not any(
                        d.type == "function_declarator" for d in child.children_by_field_name("declarator")):
                    members.update((n.text or b"").decode("utf-8", "replace") for n in _declared_by(child))
        outside = _words_outside(data, [*skipped, *((b.start_byte, b.end_byte) for b in bodies)])
        return frozenset(members - outside)

    @cached_property
    def _out_of_scope(self) -> frozenset[str]:
        """Names of the document that a variable at the hole cannot be: declared only as locals or parameters
        of other functions (another kernel's `tid`) or of this one after the hole, and never written outside
        functions nor in this function before the hole; data members of other classes (`_members`). Empty
        when the hole is in no function that parses."""
        scopes = self._scopes
        return ((scopes.declared_elsewhere | scopes.declared_after) - scopes.visible) | scopes.members

    @cached_property
    def _uses_namespace(self) -> bool:
        """A `using namespace` in the document: names of the headers' namespaces reach unqualified code."""
        return b"using namespace" in self._base_data or any("using namespace" in h for h in self.local_headers)

    @cached_property
    def _without_namespace_declarations(self) -> bytes:
        return _NAMESPACE_DECLARATION.sub(b" ", self._base_data)

    def _namespace_only(self, name: str) -> bool:
        """Whether `name` is a namespace only, here: a CUDA/C++ one or one the document qualifies with (`std::`,
        `cg::`), and the document never writes it as a value (`float std = sqrt(var);`, a standard deviation),
        a member (`.std`) or outside `namespace`/`using namespace`. Asked per name a fill uses as a value."""
        if name not in self._namespace_verdicts:
            word = name.encode()
            qualifies = name in _NAMESPACES or (word + b"::" in self._base_data and re.search(  # (a find first:
                rb"(?<![\w:])" + re.escape(word) + rb"::", self._base_data) is not None)  # most are no qualifiers)
            self._namespace_verdicts[name] = qualifies and re.search(
                rb"(?<![\w:.>])" + re.escape(word) + rb"(?!\w)(?!\s*::)", self._without_namespace_declarations) is None
        return self._namespace_verdicts[name]

    @cached_property
    def _types_only(self) -> frozenset[str]:
        """Names the document writes only where tree-sitter reads a type (`real` of `typedef float real;`,
        `Index::idx_t`): never a value, so never assigned to."""
        root = self._base_tree.root_node
        types = QueryCursor(_query("(type_identifier) @t")).captures(root).get("t", [])
        values = QueryCursor(_query("(identifier) @v")).captures(root).get("v", [])
        return frozenset({(t.text or b"").decode("utf-8", "replace") for t in types}
                         - {(v.text or b"").decode("utf-8", "replace") for v in values})

    @cached_property
    def _variables(self) -> frozenset[str]:
        """Names the document declares as variables or parameters outside templates' heads and never writes
        where tree-sitter reads a type (then they may be types after all)."""
        root = self._base_tree.root_node
        declared: set[str] = set()
        for node in QueryCursor(_query(_VARIABLES_QUERY)).captures(root).get("d", []):
            if node.parent is None or node.parent.type != "template_parameter_list":
                declared.update((name.text or b"").decode("utf-8", "replace") for name in _declared_by(node)
                                if name.type == "identifier")
        types = QueryCursor(_query("(type_identifier) @t")).captures(root).get("t", [])
        return frozenset(declared - {(t.text or b"").decode("utf-8", "replace") for t in types})

    def _known(self, node: Node, name: str) -> bool:
        if _as_value(node) and self._namespace_only(name):  # `push_back(std)`: a namespace is no value
            return False
        if _as_type(node) and name in self._variables:  # `(input) out[i]`: a variable is no type
            return False
        if _assigned_to(node) and name in self._types_only:  # `Index::idx_t = i;`: a type is no variable
            return False
        if name in BUILTINS or name in self._local_names:
            return True
        if node.type == "identifier" and _local_like(node):  # a variable: in scope here, or a header's global
            return (name in self._document_names and name not in self._out_of_scope) or (
                name in self.headers.globals or (self._uses_namespace and name in self.headers))
        return name in self._document_names or name in self.headers

    @cached_property
    def names_in_scope(self) -> frozenset[str]:
        """Names a fill may use at the hole without declaring them, from the document, its local headers and
        the CUDA built-ins (not the headers' thousands): what a misspelt name may have meant
        (`dice_lsp.cuda.renames`)."""
        return (self._document_names - self._out_of_scope) | BUILTINS | self._local_names

    def _known_field(self, name: str) -> bool:
        return (name in _VECTOR_FIELDS or name in self._document_words or name in self.headers.fields
                or name in self.headers or name in self._local_words or name in BUILTINS)

    def unknown_names(self, fill: str) -> list[tuple[int, str]]:
        """Names the fill uses that resolve nowhere, as (offset in the fill, name); empty: all resolve."""
        root, data, first, last = self._placed(fill)
        new_data = self._prefix + data + self._suffix

        def text(node: Node) -> str:
            return new_data[node.start_byte:node.end_byte].decode("utf-8", "replace")

        declared: set[str] = set()
        used: list[Node] = []
        attributes: list[Node] = []
        typed = re.search(rb"\w$", self._prefix) is not None  # the word typed before the hole, which the fill
        for node in _overlapping(root, first - typed, last):  # ends if it does not go on with it; parents first
            if node.type in _ATTRIBUTES:
                attributes.append(node)
            declared.update(text(name) for name in _declared_by(node))
            if (node.type in _NAMES or node.type == _FIELD) and not any(
                    a.start_byte <= node.start_byte and node.end_byte <= a.end_byte for a in attributes):
                used.append(node)
        unknown: list[tuple[int, str]] = []
        for node in used:
            name = text(node)
            if name in declared or (self._known_field(name) if node.type == _FIELD else self._known(node, name)):
                continue
            unknown.append((_fill_offset(data, first, node.start_byte), name))
        return unknown

    def error_spans(self, fill: str) -> list[tuple[int, int]]:
        """Character ranges of the fill that parse errors touch (what re-masking denoises again)."""
        if (alone := self._alone(fill)) is not None:
            return alone.error_spans(fill)
        root, data, first, last = self._placed(fill)

        spans = [(e.start, e.end) for e in _errors(root) if e.end >= first and e.start <= last]
        taken = self._takes_next_line(root, data)
        return [(_fill_offset(data, first, low), _fill_offset(data, first, high))
                for low, high in spans + _ill_formed(root, first, last) + ([taken] if taken else [])]

    @cached_property
    def _arities(self) -> dict[str, list[tuple[int, float]]]:
        """Functions the document declares outside function bodies, by name: the argument counts each
        declaration takes (overloads: several). Names the headers, the local headers or a function-like macro
        also declare are left out (their overloads and expansions are not seen here)."""
        root = self._base_tree.root_node
        found: dict[str, list[tuple[int, float]]] = {}
        captures = QueryCursor(_query("(function_declarator declarator: [(identifier) (field_identifier)]) @f"))
        for declarator in captures.captures(root).get("f", []):
            scope = declarator.parent
            while scope is not None and scope.type not in ("compound_statement", "parameter_list"):
                scope = scope.parent
            counts = _parameter_counts(declarator)
            name_node = declarator.child_by_field_name("declarator")
            if scope is not None or counts is None or name_node is None:
                continue  # in a body or a parameter list: maybe an object built with arguments, not a function
            found.setdefault((name_node.text or b"").decode("utf-8", "replace"), []).append(counts)
        macros = QueryCursor(_query("(preproc_function_def name: (identifier) @m)")).captures(root).get("m", [])
        hidden = {(m.text or b"").decode("utf-8", "replace") for m in macros}
        return {name: counts for name, counts in found.items()
                if name not in hidden and name not in self.headers and name not in self._local_names}

    @cached_property
    def _own_functions(self) -> frozenset[str]:
        """Names the document declares as functions (any scope, overloads of a header's included) or macros."""
        root = self._base_tree.root_node
        found = QueryCursor(_query("(function_declarator declarator: [(identifier) (field_identifier)] @f)"))
        macros = QueryCursor(_query("[(preproc_function_def name: (identifier) @f)"
                                    " (preproc_def name: (identifier) @f)]"))
        return frozenset((node.text or b"").decode("utf-8", "replace")
                         for cursor in (found, macros) for node in cursor.captures(root).get("f", []))

    def wrong_arity(self, fill: str) -> list[tuple[int, str]]:
        """Calls the fill writes or finishes with a number of arguments no declaration takes, as (offset in the
        fill, name): to a function of the document (`find_total(expert)` for `find_total(const int*, int,
        int)`), or to a CUDA function of the headers that the document does not declare again
        (`cudaMemcpy(params.h())`, `__shfl_down_sync(v, 1)`). Not the headers' other functions: projects
        overload `max`, `norm` or `round` in headers not read here (67 of 9,734 such calls in the suite's
        files, the held-out kernels and real-code set 3 took another count; of 5,729 calls to `_CUDA_API`
        names, none)."""
        header = self.headers.arity
        if not self._arities and not header:
            return []
        root, data, first, last = self._placed(fill)
        found = []
        for node in _overlapping(root, first, last):
            callee = node.child_by_field_name("function") if node.type == "call_expression" else None
            if callee is not None and callee.type == "template_function":
                callee = callee.child_by_field_name("name")
            if callee is not None and callee.type == "qualified_identifier" and (
                    callee.child_by_field_name("scope") is None):  # `::max(...)`: the global one
                callee = callee.child_by_field_name("name")
            arguments = node.child_by_field_name("arguments")
            if callee is None or callee.type != "identifier" or arguments is None or arguments.has_error or any(
                    child.type == "parameter_pack_expansion" for child in arguments.named_children):
                continue  # (`args...` stands for any number of arguments)
            name = (callee.text or b"").decode("utf-8", "replace")
            count = sum(1 for child in arguments.named_children if child.type != "comment")
            if name in self._arities:
                counts = self._arities[name]
            elif (name in header and _CUDA_API.match(name) and name not in self._own_functions
                  and name not in self._local_names):
                counts = [header[name]]
            else:
                continue
            if not any(low <= count <= high for low, high in counts):
                found.append((_fill_offset(data, first, callee.start_byte), name))
        return found

    def faults(self, fill: str) -> list[tuple[int, int]]:
        """Character ranges of the fill that a cheap check rejects: parse errors on it, unknown names, and
        all of it when it leaves a name the code after it needs undeclared."""
        spans = self.error_spans(fill) if not self.parses(fill) else []
        if self.undeclared(fill):
            spans.append((0, len(fill)))
        names = [*self.unknown_names(fill), *self.redeclared(fill), *self.wrong_arity(fill)]
        return sorted(spans + [(at, at + len(name)) for at, name in names])

    def check(self, fill: str) -> Checks:
        """Both cheap checks of one fill (`compiles` is left to the caller: it needs nvcc)."""
        return Checks(self.parses(fill), not self.unknown_names(fill) and not self.undeclared(fill)
                      and not self.redeclared(fill) and not self.wrong_arity(fill))


def parses(text: str, start: int, end: int, fill: str) -> bool:
    """Whether `fill` in place of text[start:end] parses with no error the fill is to blame for (see the module's
    docstring); for several fills of one request, build one `CheckContext`."""
    return CheckContext(text, start, end).parses(fill)


def unknown_names(text: str, start: int, end: int, fill: str, headers: HeaderIndex = HeaderIndex(),
                  local_headers: Sequence[str] = ()) -> list[tuple[int, str]]:
    """Names `fill` (in place of text[start:end]) uses that resolve nowhere, as (offset in the fill, name)."""
    return CheckContext(text, start, end, headers, local_headers).unknown_names(fill)


# ------------------------------------------------- the headers' declarations (read by toolchain/header_index.py)

_LINE_MARKER = re.compile(rb"^#.*$", re.MULTILINE)
_DEFINE = re.compile(rb"^\s*#\s*define\s+([A-Za-z_]\w*)(.*)$", re.MULTILINE)


_ATTRIBUTE = re.compile(rb"__attribute__\s*\(\((?:[^()]|\((?:[^()]|\([^()]*\))*\))*\)\)")
# subtrees whose names are not declarations a user's code can reach: bodies, parameters, expressions in types
_NOT_SCOPE = frozenset({"compound_statement", "parameter_list", "template_parameter_list", "lambda_expression",
                        "field_initializer_list", "requires_clause", "requires_expression", "decltype",
                        "trailing_return_type", "noexcept"})


def header_declarations(preprocessed: bytes, macros: bytes) -> HeaderIndex:
    """The names the preprocessed headers declare (tree-sitter, outside function bodies and parameter lists;
    `__attribute__((...))` blanked first: tree-sitter misreads `enum __attribute__((x)) cudaError {`), and the
    macro names of `macros` (`-dM` output)."""
    data = _ATTRIBUTE.sub(lambda match: b" " * len(match.group()), _LINE_MARKER.sub(b"", preprocessed))
    found: dict[str, set[str]] = {"global": set(), "scoped": set(), "field": set()}
    counts: dict[str, tuple[int, float]] = {}
    stack = [(parser().parse(data).root_node, False)]
    while stack:
        node, in_namespace = stack.pop()
        if node.type in _NOT_SCOPE:
            continue
        if node.type == "function_declarator" and not in_namespace and (arity := _parameter_counts(node)):
            name_node = node.child_by_field_name("declarator")
            if name_node is not None and name_node.type == "identifier":
                function = data[name_node.start_byte:name_node.end_byte].decode("ascii", "replace")
                low, high = counts.get(function, arity)
                counts[function] = (min(low, arity[0]), max(high, arity[1]))
        for name in _declared_by(node):
            if _WORD.fullmatch(word := data[name.start_byte:name.end_byte]):  # not a MISSING node's empty name
                where = "field" if name.type == _FIELD else "scoped" if in_namespace else "global"
                found[where].add(word.decode("ascii"))
        if node.type == "using_declaration" and not in_namespace:  # `using std::isnan;` at global scope
            found["global"].update(words(data[node.start_byte:node.end_byte].rsplit(b"::", 1)[-1]))
        inside = in_namespace or node.type == "namespace_definition"
        stack.extend((child, inside) for child in node.children)
    defined = {match.group(1).decode("ascii") for match in _DEFINE.finditer(macros)}
    found["global"].update(defined)
    return HeaderIndex(frozenset(found["global"]), frozenset(found["scoped"] - found["global"]),
                       frozenset(found["field"]),
                       frozenset((name, low, high) for name, (low, high) in counts.items() if name not in defined))
