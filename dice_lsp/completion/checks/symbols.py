"""The document's symbol table: every name it declares (with its kind, the declaring node, and the block a
variable is held to), the functions it declares with how many arguments each takes, and the names it writes,
read once from the base's tree; the CUDA built-ins, the caller's local headers and the header index are the
outer scope. What it says about one hole is `hole_scope.HoleScope`'s.

Kinds: function (a definition), prototype, variable, parameter, member, method, type, enumerator, namespace,
macro, macro parameter, template parameter. A variable's or parameter's block is its innermost block, loop,
`if`, lambda or function (C++'s block scope); the other names count function-wide or file-wide. A function's
arity is (fewest, most) arguments, defaults and `...` counted, over every declaration outside bodies.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Literal, NamedTuple

from tree_sitter import Node

from dice_lsp.cuda.functions import parser
from dice_lsp.cuda.names import (
    DECLARES,
    captured,
    declarator_names,
    declared_by,
    names_in,
    parameter_counts,
    text_of,
    words,
)
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

Kind = Literal["function", "prototype", "variable", "parameter", "member", "method", "type", "enumerator", "namespace",
               "macro", "macro parameter", "template parameter"]
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
BLOCKS = frozenset({"compound_statement", "for_statement", "for_range_loop", "if_statement", "while_statement",
                     "switch_statement", "catch_clause", "lambda_expression", "function_definition"})
# declaring nodes whose names are held to their block (macros, types and the rest count function-wide)
_HELD_TO_BLOCK = frozenset({"declaration", "init_declarator", "parameter_declaration", "optional_parameter_declaration",
                            "variadic_parameter_declaration", "for_range_loop", "condition_clause",
                            "lambda_capture_specifier"})
# nodes that hold statements: a hole inside one of them is between statements, not inside one
_VARIABLE_NODES = frozenset({"declaration", "parameter_declaration", "optional_parameter_declaration",
                             "for_range_loop"})
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
        while block is not None and block.type not in BLOCKS:
            block = block.parent
        return (block.start_byte, block.end_byte) if block is not None else None


@dataclass(frozen=True)
class Signature:
    """A function declarator of the document: its name, how many arguments it takes (None: no parameter list),
    and whether it is declared in a body or a parameter list (maybe an object built with arguments there)."""

    name: str
    arity: tuple[int, float] | None
    in_body: bool


def _declared(node: Node) -> list[tuple[Node, Kind]]:
    """The names `node` declares, each with its kind: a declaration's function declarator declares a prototype, a
    class member's a method."""
    kind = _KINDS[node.type]
    if node.type == "declaration":
        found: list[tuple[Node, Kind]] = []
        for declarator in node.children_by_field_name("declarator"):
            named: Kind = "prototype" if declarator.type == "function_declarator" else kind
            found.extend((name, named) for name in declarator_names(declarator))
        return found
    if kind == "member" and any(d.type == "function_declarator" for d in node.children_by_field_name("declarator")):
        kind = "method"
    return [(name, kind) for name in declared_by(node)]


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
            for name, kind in _declared(node):
                found.append(Declaration(text_of(name), kind, node, name.type))
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
