"""Candidates from CUDA's execution model: the lines a kernel's own structure implies, written with its names.

Some lines follow from what the function around the hole already says rather than from statistics of other code:
- `thread_index`: among the declarations a kernel starts with, a name the code below uses and nothing declares
  (or the name a half-typed declaration declares), named like an index (`i`, `idx`, `gid`, `row`, `col`, `iy`,
  `stride`, `lane`, ...), is the thread's index along the axis its name means: `int row = blockIdx.y * blockDim.y
  + threadIdx.y;` (along x where nothing else in the kernel is two-dimensional). An index that
  subscripts a `__shared__` array is the thread's place in its block (`threadIdx.x`); `stride` is the grid's
  width (`blockDim.x * gridDim.x`), `lane`/`warpId` the thread's place in and the number of its warp. The
  expression is written the way the file already writes one (`threadIdx.x + blockIdx.x * blockDim.x`), else
  the textbook way; the declared type is the typed one, else that of the function's other index declarations.
- `bounds_guard`: right after a kernel's index declarations, where the code below uses those indices, the test
  that keeps threads past the end of the data out: each index against the count of its axis (a parameter named
  so: `n`, `size`, `rows`/`height` for `y`, `cols`/`width` for `x`, ...), x's first, as `if (i < n) {` where a block
  follows that closes at the hole's indentation, `if (i < n)` where a single statement follows, `if (i >= n)
  return;` where the code continues at the hole's indentation.
- `barrier`: `__syncthreads();` after a statement (or a block) that writes a `__shared__` array, where the next
  statement is neither another write to shared memory nor a barrier: the other threads of the block read
  what was written.
- `launch_size`: a host-side count of blocks (`int blocks = `, `dim3 grid(`) is the ceiling division of the
  data's size by the block's: `(n + threads - 1) / threads;`, `(width + block.x - 1) / block.x, (height +
  block.y - 1) / block.y);`.
- `grid_stride`: where the index the code below needs opens a body and the kernel has no index yet, the
  grid-stride loop over it: `for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x *
  gridDim.x) {`; `stride_step`: the last statement of a `while (i < n)` loop nothing in it advances, `i +=
  stride;`.
- `warp_shuffle` and `halving_loop`: a loop whose distance halves to 0 exchanges values across a warp (`val +=
  __shfl_down_sync(0xffffffff, val, offset);`, the `xor` exchange and `fmaxf` where the file or the function
  says so); the header of such a loop where the code below needs its distance (`for (int offset = warpSize / 2;
  offset > 0; offset /= 2)`, and for a shared-memory tree `for (unsigned int s = blockDim.x / 2; s > 0; s >>=
  1)`).
- `block_result`: after a shared-memory tree reduction, `if (tid == 0) out[blockIdx.x] = sdata[0];` into the one
  output nothing writes yet.
- `next_creation` and `copy_pair` (host code): after `cudaMalloc((void **)&d_a, bytes);` the same for the
  next of the variables declared with `d_a` that nothing allocates yet; a half-typed `cudaMemcpy(d_b, ` copies
  from `h_b`, `cudaMemcpy(h_out, ` from `d_out`, the size the device buffer was allocated with.
- `release`: at a host function's tail, after a release or the copy of the results back, the release of the
  first thing the function allocated or created and has not released (`cudaFree(d_b);`, `cudaEventDestroy(e);`).

Each rule proposes at most one text; it proposes nothing where the names it needs are missing or ambiguous
(two counts for one axis). A rule knows no statistics: its `score` is 1 and the show filter learns from the rule's
name (`RuleCandidate.rule`) and the hole's other features how often such a line is right.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from functools import cached_property
from typing import TYPE_CHECKING

from dice_lsp.completion.lexing import declared_name
from dice_lsp.completion.scope import FunctionScope, Name
from dice_lsp.completion.sources import Candidate
from dice_lsp.completion.sources.idioms import continuation

if TYPE_CHECKING:
    from dice_lsp.completion.checks.request import Request

SOURCE = "rule"
# RuleCandidate.rule (its index is a feature: append, never reorder)
RULES = ("thread_index", "grid_stride", "bounds_guard", "barrier", "launch_size", "warp_shuffle", "halving_loop",
         "stride_step", "release", "block_result", "next_creation", "copy_pair")

_INTEGER_TYPES = frozenset({"int", "unsigned", "unsigned int", "long", "unsigned long", "long long",
                            "unsigned long long", "size_t", "int32_t", "int64_t", "uint32_t", "uint64_t",
                            "ptrdiff_t", "short", "unsigned short"})
# index names by the axis they run along (anything matching _INDEX_NAME runs along x)
_AXIS_NAMES = {"x": {"i", "x", "ix", "col", "column", "gx"}, "y": {"j", "y", "iy", "row", "gy"},
               "z": {"iz", "z", "gz"}}
_AXIS_OF = {name: axis for axis, names in _AXIS_NAMES.items() for name in names}
_GENERIC = frozenset({"i", "j"})  # run along an axis, but name no count: `i < n` as readily as `i < width`
_INDEX_NAME = re.compile(r"(?i)(?:g|global|thread|gthread|t)?_?(?:idx|index|id|tid)")
_STRIDE_NAMES = frozenset({"stride", "gridStride", "grid_stride", "gridstride"})
_LANE_NAMES = frozenset({"lane", "laneId", "lane_id", "laneIdx", "laneid"})
_WARP_NAMES = frozenset({"warp", "warpId", "warp_id", "wid", "warpIdx", "warpid"})
# counts by the axis they bound; a one-dimensional kernel's count is one of _COUNTS
_COUNTS = frozenset({"n", "N", "size", "count", "len", "length", "numElements", "num_elements", "nElements",
                     "total", "numel", "elements", "num", "nelems", "n_elements"})
_AXIS_COUNTS = {"x": frozenset({"width", "w", "W", "nx", "cols", "ncols", "numCols", "num_cols", "n_cols",
                                "columns", "Nx", "NX"}),
                "y": frozenset({"height", "h", "H", "ny", "rows", "nrows", "numRows", "num_rows", "n_rows",
                                "Ny", "NY"}),
                "z": frozenset({"depth", "d", "D", "nz", "Nz", "NZ"})}
_BLOCK_COUNT_NAMES = frozenset({"blocks", "numBlocks", "nBlocks", "num_blocks", "nblocks", "blocksPerGrid",
                                "blocks_per_grid", "gridSize", "grid_size", "numBlock", "blockCount", "grid"})
_BLOCK_SIZE_NAMES = frozenset({"threads", "blockSize", "block_size", "threadsPerBlock", "threads_per_block",
                               "nThreads", "numThreads", "num_threads", "BLOCK_SIZE", "THREADS", "block",
                               "blockDimX", "BLOCK", "TPB", "THREADS_PER_BLOCK", "tpb"})
# `blockIdx.A * blockDim.A + threadIdx.A` as files write it: the form a file uses most is followed
_INDEX_FORMS = ("blockIdx.{a} * blockDim.{a} + threadIdx.{a}", "threadIdx.{a} + blockIdx.{a} * blockDim.{a}",
                "blockDim.{a} * blockIdx.{a} + threadIdx.{a}", "threadIdx.{a} + blockDim.{a} * blockIdx.{a}")
_FORM_PATTERNS = [re.compile(r"\s*".join(re.escape(part) for part in re.split(r"\s+", form.format(a="AXIS")))
                             .replace("AXIS", "[xyz]")) for form in _INDEX_FORMS]
_INTEGER_TYPE = (r"(?:unsigned\s+|signed\s+)?(?:long\s+long|int|long|short|size_t|unsigned|int32_t|int64_t|uint32_t|"
                 r"uint64_t|ptrdiff_t|auto)")
_DECLARATION = re.compile(rf"^\s*(?:const\s+)?(?P<type>{_INTEGER_TYPE})\s+(?P<name>[A-Za-z_]\w*)\s*=(?P<value>[^;]*);")
_TYPED_INTEGER = re.compile(rf"^(?:const\s+)?{_INTEGER_TYPE}\s+[A-Za-z_]\w*\s*=")
# what a thread's index is computed from: the builtins, or a project's helper named so (`grid_thread_id<1>(item)`)
_THREAD_SOURCE = re.compile(r"\b(?:blockIdx|threadIdx)\b|\w*(?:thread|warp|lane|grid|block)\w*\s*(?:<[^>]*>)?\s*\(",
                            re.IGNORECASE)
_WARP_SIZE = re.compile(r"\b(?:warpSize|kWarpSize|WARP_SIZE|warp_size|WARPSIZE|kWarpSz)\b")  # the file's name for 32
_DIM3_TYPED = re.compile(r"^dim3\s+(?P<name>[A-Za-z_]\w*)\s*\(")
_COMMENT_LINE = re.compile(r"//|/\*|\*(?:\s|/|$)")


@dataclass(frozen=True)
class RuleCandidate(Candidate):
    """A rule's line, and the rule that wrote it (one of `RULES`)."""

    rule: str = ""

    @property
    def rule_index(self) -> int:
        return RULES.index(self.rule)


@dataclass(frozen=True)
class _Hole:
    """What the rules read of a hole: the typed text, the hole line's indentation, the code lines around it (each
    as written, blank and comment lines left out) and the function's names."""

    before: str
    after: str
    typed: str
    indent: int
    above: list[str]  # nearest first
    below: list[str]  # nearest first, up to the function's end (the first `}` in column 0)
    scope: FunctionScope
    needed: frozenset[str]

    @property
    def names(self) -> Mapping[str, Name]:
        return self.scope.names

    @cached_property
    def text(self) -> str:
        """The whole document (what the file already writes is read from it)."""
        return self.before + self.after

    @cached_property
    def function(self) -> list[str]:
        """The function's code lines above the hole, nearest first: its body's (the checks' tree tells where the
        body starts), else, where no function was found, the lines up to one in column 0 (a signature)."""
        body = self.scope.body_above
        if body is not None:
            return _code_lines(body.split("\n"))[::-1]
        found = []
        for line in self.above:
            if _indent(line) == 0 and line.strip() != "{":
                break
            found.append(line)
        return found

    @cached_property
    def integers(self) -> dict[str, Name]:
        """The function's integer scalars (parameters and locals in scope), counts and indices among them."""
        return {n: found for n, found in self.names.items()
                if not found.pointer and " ".join(found.type.split()) in _INTEGER_TYPES}

    @cached_property
    def shared(self) -> list[str]:
        """The function's `__shared__` arrays in scope."""
        return [n for n, found in self.names.items() if found.shared]


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _code_lines(lines: list[str]) -> list[str]:
    """The lines with code: no blank lines, no comment lines (`//`, `/*`, a block comment's ` * ` lines; a line
    that starts with a dereference, `*(out + i) = v;`, is code)."""
    return [line for line in lines if line.strip() and not _COMMENT_LINE.match(line.strip())]


def _hole(before: str, after: str, needed: frozenset[str], checks: Request | None) -> _Hole | None:
    """The hole as the rules read it; None where text follows the cursor on its line (no line's end to write)."""
    head_start = before.rfind("\n") + 1
    rest_end = after.find("\n")
    if after[:rest_end if rest_end >= 0 else len(after)].strip():
        return None  # text after the cursor on its line: not a line's end
    head = before[head_start:]
    above = _code_lines(before[:head_start].split("\n"))[::-1]
    below: list[str] = []
    for line in _code_lines(after.split("\n")[1:] if rest_end >= 0 else []):
        if line.startswith("}"):
            break
        below.append(line)
    return _Hole(before, after, head.lstrip(), _indent(head), above, below, FunctionScope.of(before, after, checks),
                 needed)


def _line(hole: _Hole, text: str) -> str | None:
    """What `text` (the whole statement) adds after what is typed on the hole's line."""
    return continuation(text, hole.typed)


def _words(line: str) -> set[str]:
    return set(re.findall(r"[A-Za-z_]\w*", line))


def _index_form(hole: _Hole) -> str:
    """The file's way of writing a global index (the form it uses most, the first one on a tie), else the
    textbook one."""
    text = hole.text
    counts = [len(pattern.findall(text)) for pattern in _FORM_PATTERNS]
    best = max(range(len(counts)), key=lambda i: (counts[i], -i))
    return _INDEX_FORMS[best if counts[best] else 0]


def _declared_type(hole: _Hole) -> str:
    """The integer type of the function's index declarations above the hole (`int` where it has none)."""
    for line in hole.function:
        found = _DECLARATION.match(line)
        if found and ("threadIdx" in found["value"] or "blockIdx" in found["value"]):
            return " ".join(found["type"].split())
    return "int"


def _subscripts_shared(hole: _Hole, name: str) -> bool:
    return any(re.search(rf"\b{re.escape(array)}\s*\[[^\]]*\b{re.escape(name)}\b", line)
               for line in hole.below for array in hole.shared)


def _index_value(hole: _Hole, name: str) -> str | None:
    """The value of a thread index named `name`, or None when the name says no axis."""
    named = _WARP_SIZE.search(hole.text)
    warp = named[0] if named else "32"
    if name in _STRIDE_NAMES:
        return "gridDim.x * blockDim.x" if re.search(r"gridDim\.x\s*\*\s*blockDim\.x", hole.text) \
            else "blockDim.x * gridDim.x"
    if name in _LANE_NAMES:
        return f"threadIdx.x % {warp}"
    if name in _WARP_NAMES:
        return f"threadIdx.x / {warp}"
    axis = _AXIS_OF.get(name) or ("x" if _INDEX_NAME.fullmatch(name) else None)
    if axis is None:
        return None
    function = " ".join(hole.function + hole.below)
    pointers = {n for n, found in hole.names.items() if found.pointer}  # `x` the input is no column index
    if axis == "y" and not re.search(r"\b(?:blockIdx|threadIdx|blockDim|gridDim)\.[yz]\b", function) and not (
            (_words(function) | set(hole.names)) - pointers) & (_AXIS_NAMES["x"] - _GENERIC):
        axis = "x"  # a one-dimensional kernel: its rows run along the grid's only axis
    if _subscripts_shared(hole, name):
        if axis == "x" and name not in _AXIS_OF and "threadIdx.y" in function:
            return "threadIdx.y * blockDim.x + threadIdx.x"  # a two-dimensional block's threads, one after another
        return f"threadIdx.{axis}"
    return _index_form(hole).format(a=axis)


def _opens_body(hole: _Hole) -> bool:
    """The code right below the hole is indented deeper: the hole's line opens a body (`if`, `for`)."""
    return bool(hole.below) and _indent(hole.below[0]) > hole.indent


def _declared_axes(hole: _Hole) -> set[str]:
    """The axes along which the function declares a global index above the hole."""
    axes: set[str] = set()
    for line in hole.function:
        declaration = _DECLARATION.match(line)
        if declaration and "blockIdx" in declaration["value"] and "threadIdx" in declaration["value"]:
            axes |= set(re.findall(r"blockIdx\.([xyz])", declaration["value"]))
    return axes


def _wanted_index(hole: _Hole) -> tuple[str, str] | None:
    """The one index the hole's line declares and its value: the name a typed integer declaration declares, or
    the one needed name that says an axis, along which the function declares no index yet."""
    typed_name = declared_name(hole.typed)
    if hole.typed and (typed_name is None or not _TYPED_INTEGER.match(hole.typed)):
        return None
    wanted = [typed_name] if typed_name else sorted(hole.needed)
    values = [(name, _index_value(hole, name)) for name in wanted]
    found = [(name, value) for name, value in values if value is not None]
    if len(found) != 1:
        return None
    name, value = found[0]
    if "blockIdx" in value and set(re.findall(r"blockIdx\.([xyz])", value)) & _declared_axes(hole):
        return None
    two = re.compile(rf"\b{re.escape(name)}\s*\+\s*blockDim\.x\b")
    if "blockIdx" in value and any(two.search(line) for line in hole.below):
        value = value.replace("blockDim.x", "(blockDim.x * 2)", 1)  # each thread takes two elements a block apart
    if _file_says_otherwise(hole, name, value):
        return None
    return name, value


def _file_says_otherwise(hole: _Hole, name: str, value: str) -> bool:
    """The file computes a thread index named `name` elsewhere, never as `value` (`const int row = blockIdx.x;`, a
    project's `thread_id = grid_thread_id<1, 1>(item);`): its own convention, which the document's lines propose,
    wins."""
    declared = re.compile(rf"^\s*(?:const\s+)?[\w:<>]+(?:\s+[\w:<>]+)?\s+{re.escape(name)}\s*=\s*(?P<v>[^;]+);",
                          re.MULTILINE)
    found = [" ".join(m["v"].split()) for text in (hole.before[:hole.before.rfind("\n") + 1], hole.after)
             for m in declared.finditer(text)]
    indices = [other for other in found if _THREAD_SOURCE.search(other)]  # (a `row` of another role is no index)
    return bool(indices) and value not in indices


def _among_declarations(hole: _Hole) -> bool:
    """The hole's line is among the declarations a kernel starts with: every line of the function above it
    declares something (no statement, no loop or test yet), at the hole's indentation."""
    return all(line.strip() == "{" or (_indent(line) == hole.indent and declared_name(line.strip()) is not None)
               for line in hole.function)


def thread_index(hole: _Hole) -> str | None:
    """`int i = blockIdx.x * blockDim.x + threadIdx.x;` for the index the hole declares (see the module)."""
    if not hole.scope.is_kernel or _opens_body(hole) or not _among_declarations(hole):
        return None
    wanted = _wanted_index(hole)
    if wanted is None:
        return None
    name, value = wanted
    if hole.typed:
        head = hole.typed[:hole.typed.rfind(name) + len(name)]
        return _line(hole, f"{head} = {value};")
    return f"{_declared_type(hole)} {name} = {value};"


def grid_stride(hole: _Hole) -> str | None:
    """`for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {`: the needed
    index of a kernel that declares no thread index yet, where a body follows (see the module); where the kernel
    reads `blockIdx.x` itself (a block per row), the block's threads stride over it: `for (int i = threadIdx.x; i
    < n; i += blockDim.x) {`."""
    if not hole.scope.is_kernel or not _opens_body(hole) or _declared_axes(hole) or (
            hole.typed and not "for (int ".startswith(hole.typed[:9])):
        return None
    if any(n in _LANE_NAMES | _WARP_NAMES | _STRIDE_NAMES for n in hole.names):
        return None
    wanted = _wanted_index(replace(hole, typed=""))
    if wanted is None or "blockIdx.x" not in wanted[1] or "(blockDim.x * 2)" in wanted[1]:
        return None
    name, value = wanted
    count = _count(hole, name, "x", True)
    if count is None:
        return None
    step = _index_value(hole, "stride")
    if any("blockIdx.x" in line for line in hole.function + hole.below):
        value, step = "threadIdx.x", "blockDim.x"  # a block per row (the code reads blockIdx.x): its threads stride
    counted = " ".join(hole.names[count].type.split()) if count in hole.names else ""
    kind = counted if counted in _INTEGER_TYPES else _declared_type(hole)  # the index counts as its bound does
    return _line(hole, _opened(hole, f"for ({kind} {name} = {value}; {name} < {count}; "
                                     f"{name} += {step})"))


def _opened(hole: _Hole, head: str) -> str:
    """`head` (an `if (...)`/`for (...)`) as the hole's line writes it: with `{` where the body below closes at the
    hole's indentation or runs on past one statement, without where one statement is the body."""
    deeper = [line for line in hole.below[1:] if _indent(line) > hole.indent]
    closing = next((line for line in hole.below[1:] if _indent(line) <= hole.indent), None)
    if closing is not None and closing.strip().startswith("}") and _indent(closing) == hole.indent:
        return f"{head} {{"
    if closing is None and len(deeper) + 1 == len(hole.below) and deeper:
        return f"{head} {{"  # a body of several statements the user has not closed yet
    return head


def _indices(hole: _Hole) -> list[tuple[str, str]] | None:
    """The global indices the hole's line may guard, as (name, axis), in the order they are declared: the
    function's declarations right above the hole whose values read `blockIdx` and `threadIdx` (only such
    declarations between them and the hole); None where the line above is no declaration."""
    found: list[tuple[str, str]] = []
    for line in hole.above:
        declaration = _DECLARATION.match(line)
        if declaration is None or _indent(line) != hole.indent:
            break
        value = declaration["value"]
        axes = set(re.findall(r"(?:blockIdx|threadIdx)\.([xyz])", value))
        if "blockIdx" in value and "threadIdx" in value and len(axes) == 1:
            found.append((declaration["name"], axes.pop()))
    return found[::-1] or None


def _count(hole: _Hole, name: str, axis: str, alone: bool) -> str | None:
    """The count that bounds index `name` along `axis`: the function's one integer parameter (or local) named for
    the axis the index's name says (`row`: `rows`, `height`, ...), or for `axis` where the kernel has several
    indices, else (one index named `i`, `idx`, ...) its one integer named a count, or its only integer parameter
    when none is."""
    integers = hole.integers
    says = _AXIS_OF.get(name) if name not in _GENERIC else None
    if says is not None or not alone:  # `row` runs over the rows whichever axis of the grid it takes
        named = [n for n in integers if n in _AXIS_COUNTS[says or axis]]
        return named[0] if len(named) == 1 else None
    counts = [n for n in integers if n in _COUNTS]
    if counts:
        return counts[0] if len(counts) == 1 else None
    parameters = [n for n, found in integers.items() if found.parameter]
    return parameters[0] if len(parameters) == 1 else None


def bounds_guard(hole: _Hole) -> str | None:
    """`if (i < n) {` right after the index declarations (see the module)."""
    if not hole.scope.is_kernel or not hole.below or hole.needed:
        return None
    indices = _indices(hole)
    if indices is None:
        return None
    names = {name for name, _ in indices}
    first = hole.below[0]
    if not names & _words(first) and not (_indent(first) > hole.indent and names & _words(" ".join(hole.below))):
        return None
    if first.lstrip().startswith("if") and names & _words(first):
        return None  # guarded already
    # x's index first whatever the order of the declarations: most two-dimensional guards are written so
    # (docs/bench-logs/idioms/2026-12-07_guard_order)
    ordered = sorted(indices, key=lambda index: "xyz".index(index[1]))
    bounds = [(name, _count(hole, name, axis, len(indices) == 1)) for name, axis in ordered]
    if any(count is None for _, count in bounds):
        return None
    outside = " || ".join(f"{name} >= {count}" for name, count in bounds)
    if _indent(first) > hole.indent:
        if first.strip() == "return;":  # the body leaves: the test says who is outside
            return _line(hole, _opened(hole, f"if ({outside})"))
        return _line(hole, _opened(hole, "if ({})".format(" && ".join(f"{name} < {count}" for name, count in bounds))))
    return _line(hole, f"if ({outside}) return;")


def _writes_shared(line: str, shared: list[str]) -> bool:
    return any(re.search(rf"\b{re.escape(array)}\s*\[[^;]*?\]\s*(?:[-+*/%&|^]|<<|>>)?=(?!=)", line)
               for array in shared)


def _block_above(hole: _Hole) -> list[str]:
    """The statement above the hole: its line, or where that line closes a block (`}`), the block's lines."""
    if not hole.above:
        return []
    if hole.above[0].strip() != "}":
        return [hole.above[0]]
    depth = _indent(hole.above[0])
    block = []
    for line in hole.above[1:]:
        block.append(line)
        if _indent(line) <= depth:
            break
    return block


def barrier(hole: _Hole) -> str | None:
    """`__syncthreads();` after a write to shared memory (see the module)."""
    if not hole.scope.is_kernel:
        return None
    shared = hole.shared
    block = _block_above(hole)
    if not shared or not any(_writes_shared(line, shared) for line in block):
        return None
    if len(block) > 1 and "__syncthreads" in block[0]:
        return None  # the block above ends with a barrier
    if hole.below and (_writes_shared(hole.below[0], shared) or "__syncthreads" in hole.below[0]):
        return None
    return _line(hole, "__syncthreads();")


def launch_size(hole: _Hole) -> str | None:
    """`int blocks = (n + threads - 1) / threads;`, `dim3 grid((w + block.x - 1) / block.x, ...);` on the host
    (see the module)."""
    if hole.scope.is_kernel or not hole.typed:
        return None
    names = hole.names
    dim3 = _DIM3_TYPED.match(hole.typed)
    if dim3 is not None and dim3["name"] in _BLOCK_COUNT_NAMES:
        blocks = [n for n, found in names.items() if found.type == "dim3" and n in _BLOCK_SIZE_NAMES]
        if len(blocks) != 1:
            return None
        block = blocks[0]
        dims = re.search(rf"\bdim3\s+{re.escape(block)}\s*\(([^;]*)\)\s*;", hole.before)
        rank = len(dims[1].split(",")) if dims else 1
        sizes = []
        for axis in "xyz"[:rank]:
            named = [n for n in hole.integers if n in _AXIS_COUNTS[axis]]
            if rank == 1:
                named = named or [n for n, found in names.items() if n in _COUNTS and not found.pointer]
            if len(named) != 1:
                return None
            sizes.append(f"({named[0]} + {block}.{axis} - 1) / {block}.{axis}")
        return _line(hole, f"{hole.typed.rstrip()}{', '.join(sizes)});")
    declared = declared_name(hole.typed)
    if declared not in _BLOCK_COUNT_NAMES or not hole.typed.rstrip().endswith("="):
        return None
    threads = [n for n in hole.integers if n in _BLOCK_SIZE_NAMES]
    sizes = [n for n in hole.integers if n in _COUNTS]
    if len(threads) != 1 or len(sizes) != 1:
        return None
    return _line(hole, f"{hole.typed.rstrip()} ({sizes[0]} + {threads[0]} - 1) / {threads[0]};")


_HALVING = re.compile(r"^for\s*\(\s*(?:unsigned\s+)?(?:int\s+)?(?P<v>[A-Za-z_]\w*)\s*=[^;]*;\s*(?P=v)\s*>\s*0\s*;\s*"
                      r"(?P=v)\s*(?:/=\s*2|>>=\s*1)\s*\)")
_SHUFFLED = re.compile(r"__shfl_(?:down|xor)_sync\s*\([^;]*,\s*(?P<v>[A-Za-z_]\w*)\s*\)")
_MASK = re.compile(r"#\s*define\s+(?P<name>\w*MASK\w*)\s+0x[fF]{8}\b")


def _shuffle(hole: _Hole, value: str, lane: str) -> str:
    """`__shfl_down_sync(0xffffffff, value, lane)`: `xor` where the file exchanges so (or the function reduces
    to every lane), the file's name for the full mask."""
    text = hole.text
    mask = _MASK.search(text)
    xor = "__shfl_xor_sync" in text or re.search(r"(?i)all_?reduce|butterfly", hole.scope.signature)
    return f"__shfl_{'xor' if xor else 'down'}_sync({mask['name'] if mask else '0xffffffff'}, {value}, {lane})"


def warp_shuffle(hole: _Hole) -> str | None:
    """The body of a halving loop over a warp (`for (int offset = 16; offset > 0; offset /= 2)`): the value
    combined with the one `offset` lanes away, `val += __shfl_down_sync(0xffffffff, val, offset);` (the value: the
    one the typed text updates, else the one the function returns after the loop)."""
    if not hole.above or _indent(hole.above[0]) >= hole.indent:
        return None
    loop = _HALVING.match(hole.above[0].strip())
    if loop is None:
        return None
    typed = re.match(r"^(?P<a>[A-Za-z_]\w*)\s*(?P<op>\+=|=)", hole.typed)
    if typed is not None:
        value = typed["a"]
    else:
        returned = next((re.match(r"^return\s+([A-Za-z_]\w*)\s*;", line.strip()) for line in hole.below
                         if _indent(line) <= _indent(hole.above[0]) and line.strip() != "}"), None)
        if returned is None:
            return None
        value = returned[1]
    exchanged = _shuffle(hole, value, loop["v"])
    maximum = typed is not None and typed["op"] == "=" and "fmaxf" in hole.typed
    if maximum or re.search(r"(?i)max", hole.scope.signature):
        return _line(hole, f"{value} = fmaxf({value}, {exchanged});")
    return _line(hole, f"{value} += {exchanged};")


def halving_loop(hole: _Hole) -> str | None:
    """The loop header whose variable the code below needs as a distance that halves: across a warp's lanes where
    it is a shuffle's lane offset (`for (int offset = warpSize / 2; offset > 0; offset /= 2)`), across a block's
    threads where it bounds the active threads of a shared-memory tree (`for (unsigned int s = blockDim.x / 2; s >
    0; s >>= 1)`; `s < blockDim.x; s *= 2` where the tree pairs `tid % (2 * s)`)."""
    if not _opens_body(hole) or len(hole.needed) != 1 or (hole.typed and not hole.typed.startswith("for")):
        return None
    (name,) = hole.needed
    body = " ".join(line.strip() for line in hole.below)
    text = hole.text
    halve = ">>= 1" if ">>= 1" in text and "/= 2" not in text else "/= 2"
    if any(found["v"] == name for found in _SHUFFLED.finditer(body)):
        start = "warpSize / 2" if "warpSize" in text else "16"
        return _line(hole, _opened(hole, f"for (int {name} = {start}; {name} > 0; {name} {halve})"))
    tree = re.search(rf"\b(?P<t>[A-Za-z_]\w*)\s*\+\s*{re.escape(name)}\s*\]", body)
    if tree is None or not hole.scope.is_kernel or tree["t"] not in hole.names:
        return None
    kind = hole.names[tree["t"]].type or "int"
    if re.search(rf"%\s*\(\s*2\s*\*\s*{re.escape(name)}\s*\)", body):
        return _line(hole, _opened(hole, f"for ({kind} {name} = 1; {name} < blockDim.x; {name} *= 2)"))
    if re.search(rf"\b{re.escape(tree['t'])}\s*<\s*{re.escape(name)}\b", body):
        return _line(hole, _opened(hole, f"for ({kind} {name} = blockDim.x / 2; {name} > 0; {name} >>= 1)"))
    return None


_WHILE = re.compile(r"^while\s*\(\s*(?P<v>[A-Za-z_]\w*)\s*<\s*[^)]*\)\s*\{?$")


def stride_step(hole: _Hole) -> str | None:
    """The last statement of a grid-stride `while (i < n)` loop that nothing in it advances: `i += stride;` (the
    function's stride, else the grid's width)."""
    if not hole.scope.is_kernel or not hole.above or not hole.below:
        return None
    header = next((line for line in hole.above if _indent(line) < hole.indent), None)
    loop = _WHILE.match(header.strip()) if header is not None else None
    if header is None or loop is None or _indent(hole.below[0]) >= hole.indent:
        return None
    name = loop["v"]
    body = hole.above[:hole.above.index(header)]
    if any(re.search(rf"\b{re.escape(name)}\s*(?:\+\+|\+=|=(?!=))|\+\+\s*{re.escape(name)}\b", line) for line in body):
        return None
    strides = [n for n in hole.names if n in _STRIDE_NAMES]
    step = strides[0] if len(strides) == 1 else _index_value(hole, "stride")
    return _line(hole, f"{name} += {step};")


_TREE = re.compile(r"^for\s*\([^;]*;\s*(?P<v>[A-Za-z_]\w*)\s*(?:>\s*0|<\s*blockDim\.x)\s*;\s*(?P=v)\s*"
                   r"(?:>>=\s*1|/=\s*2|\*=\s*2|<<=\s*1)\s*\)")


def block_result(hole: _Hole) -> str | None:
    """Right after a shared-memory tree reduction (a halving or doubling loop over `blockDim.x` that combines `A[t]`
    with `A[t + s]`), its first thread writes the block's result to the one output nothing writes yet: `if (tid ==
    0) out[blockIdx.x] = sdata[0];`."""
    if not hole.scope.is_kernel or not hole.above or hole.above[0].strip() != "}":
        return None
    block = _block_above(hole)
    tree = _TREE.match(block[-1].strip()) if block else None
    if tree is None:
        return None
    distance = tree["v"]
    pairs = [re.search(rf"\b(?P<a>[A-Za-z_]\w*)\s*\[\s*(?P<t>[A-Za-z_]\w*)\s*\]\s*[-+*]?=\s*[^;]*"
                       rf"\b(?P=a)\s*\[\s*(?P=t)\s*\+\s*{re.escape(distance)}\s*\]", line) for line in block]
    pair = next((found for found in pairs if found is not None), None)
    if pair is None or not hole.names.get(pair["a"], Name("", False, False, False, 0)).shared:
        return None
    outputs = [n for n, found in hole.names.items()
               if found.parameter and found.pointer and not found.constant and found.uses == 0]
    if len(outputs) != 1:
        return None
    return _line(hole, f"if ({pair['t']} == 0) {outputs[0]}[blockIdx.x] = {pair['a']}[0];")


_CREATION = re.compile(r"^(?P<call>cudaMalloc\w*|cudaHostAlloc|cudaEventCreate\w*|cudaStreamCreate\w*)\s*\((?P<cast>\s*"
                       r"\(\s*void\s*\*\*\s*\)\s*)?&\s*(?P<name>[A-Za-z_]\w*)\b(?P<rest>[^;]*);$")


def _declared_with(lines: list[str], name: str) -> list[str]:
    """The variables one declaration statement among `lines` declares together with `name`, in its order
    (`float *d_a, *d_b, *d_out;`, `cudaEvent_t start, stop;`); [] where `name` is declared alone."""
    for line in lines:
        parts = line.strip().rstrip(";").split(",")
        if len(parts) < 2 or not line.strip().endswith(";") or "(" in line or "=" in line:
            continue
        names = [re.findall(r"[A-Za-z_]\w*", part)[-1] for part in parts if re.findall(r"[A-Za-z_]\w*", part)]
        if name in names and len(names) == len(parts):
            return names
    return []


def next_creation(hole: _Hole) -> str | None:
    """After a host call that allocates or creates through a pointer (`cudaMalloc((void **)&d_a, bytes);`,
    `cudaEventCreate(&start);`), the same call for the first variable declared together with that one that no
    such call in the function allocates or creates yet (`d_b`, `stop`)."""
    if hole.scope.is_kernel or not hole.above or (hole.typed and not hole.typed.startswith("cuda")):
        return None
    made = _CREATION.match(hole.above[0].strip())
    if made is None:
        return None
    function = hole.function
    lines = [line.strip() for line in function + hole.below]
    done = {m["name"] for line in lines if (m := _CREATION.match(line)) and m["call"] == made["call"]}
    waiting = [n for n in _declared_with(function, made["name"]) if n not in done]
    if not waiting:
        return None
    cast = made["cast"] or ""
    return _line(hole, f"{made['call']}({cast.strip()}&{waiting[0]}{made['rest']};")


def _partner(name: str, names: Mapping[str, Name]) -> tuple[str, str] | None:
    """The host/device partner of a buffer named the usual way (`d_x`/`h_x`, `dX`/`hX`, `x_d`/`x_h`) that the
    function has, and the direction of a copy into `name`."""
    pairs = ((r"^d_(\w+)$", "h_{}", "HostToDevice"), (r"^h_(\w+)$", "d_{}", "DeviceToHost"),
             (r"^d([A-Z]\w*)$", "h{}", "HostToDevice"), (r"^h([A-Z]\w*)$", "d{}", "DeviceToHost"),
             (r"^(\w+)_d$", "{}_h", "HostToDevice"), (r"^(\w+)_h$", "{}_d", "DeviceToHost"))
    for pattern, other, direction in pairs:
        found = re.match(pattern, name)
        if found and other.format(found[1]) in names:
            return other.format(found[1]), direction
    return None


def copy_pair(hole: _Hole) -> str | None:
    """A half-typed `cudaMemcpy(d_x, ` copies from the buffer's host partner (`h_x`) and `cudaMemcpy(h_x, ` from its
    device partner, the size the device buffer was allocated with: `h_x, bytes, cudaMemcpyHostToDevice);`."""
    typed = re.match(r"^cudaMemcpy\(\s*(?P<name>[A-Za-z_]\w*)\s*,\s*$", hole.typed)
    if hole.scope.is_kernel or typed is None:
        return None
    partner = _partner(typed["name"], hole.names)
    if partner is None:
        return None
    source, direction = partner
    device = typed["name"] if direction == "HostToDevice" else source
    text = "\n".join(hole.function)
    allocated = re.search(rf"cudaMalloc\w*\s*\((?:\s*\(\s*void\s*\*\*\s*\)\s*)?&\s*{re.escape(device)}\s*,\s*"
                          r"(?P<size>[^;]*)\)\s*;", text)
    if allocated is None:
        return None
    return _line(hole, f"{hole.typed.rstrip()} {source}, {allocated['size'].strip()}, cudaMemcpy{direction});")


# what releases what an allocation call made, by the call
_RELEASES = {"cudaMalloc": "cudaFree", "cudaMallocManaged": "cudaFree", "cudaMallocPitch": "cudaFree",
             "cudaMallocAsync": "cudaFree", "cudaMallocHost": "cudaFreeHost", "cudaHostAlloc": "cudaFreeHost",
             "cudaEventCreate": "cudaEventDestroy", "cudaEventCreateWithFlags": "cudaEventDestroy",
             "cudaStreamCreate": "cudaStreamDestroy", "cudaStreamCreateWithFlags": "cudaStreamDestroy"}
_ALLOCATION = re.compile(r"\b(?P<call>" + "|".join(sorted(_RELEASES, key=len, reverse=True)) +
                         r")\s*\(\s*(?:\(\s*void\s*\*\*\s*\)\s*)?&\s*(?P<name>[A-Za-z_]\w*)\s*[,)]")
_RELEASE = re.compile(r"^(?P<call>cudaFree|cudaFreeHost|cudaEventDestroy|cudaStreamDestroy)\s*\(\s*"
                      r"(?P<name>[A-Za-z_]\w*)\s*\)\s*;")


def release(hole: _Hole) -> str | None:
    """At a host function's tail, where the line above releases a resource or copies the results back and the code
    below only releases or returns: the release of the first resource the function made and neither releases nor
    uses after the hole (`cudaFree(d_b);` after `cudaFree(d_a);`)."""
    if hole.scope.is_kernel or not hole.above:
        return None
    last = hole.above[0].strip()
    if _RELEASE.match(last) is None and not (last.startswith("cudaMemcpy") and "DeviceToHost" in last):
        return None
    tail = [line.strip() for line in hole.below if line.strip() != "}"]
    if any(not (_RELEASE.match(line) or line.startswith("return")) for line in tail):
        return None
    function = hole.function
    released = {(m["call"], m["name"]) for line in function + tail if (m := _RELEASE.match(line.strip()))}
    made = [(_RELEASES[m["call"]], m["name"]) for line in reversed(function) for m in _ALLOCATION.finditer(line)]
    for call, name in made:
        if (call, name) not in released and not any(re.search(rf"\b{re.escape(name)}\b", line) for line in tail):
            return _line(hole, f"{call}({name});")
    return None


_RULES: tuple[Callable[[_Hole], str | None], ...] = (thread_index, grid_stride, bounds_guard, barrier, launch_size,
                                                     warp_shuffle, halving_loop, stride_step, release, block_result,
                                                     next_creation, copy_pair)


def candidates(before: str, after: str, needed: frozenset[str] = frozenset(), checks: Request | None = None,
               limit: int = len(RULES)) -> list[RuleCandidate]:
    """What the rules write for a hole on one line (`before` ends at the cursor, `after` starts there; `needed`:
    the names the code below uses that nothing declares), as the rest of the line after what was typed."""
    hole = _hole(before, after, needed, checks)
    if hole is None:
        return []
    found: list[RuleCandidate] = []
    for rule in _RULES:
        text = rule(hole)
        if text is not None and text.strip() and all(c.text != text for c in found):
            found.append(RuleCandidate(text, SOURCE, 1.0, rule.__name__))
    return found[:limit]
