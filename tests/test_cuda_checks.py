"""Golden cases for the checks a completion passes before it is shown: `‸` marks the region (empty), the fill
goes there; each case says in one line why it must pass or fail."""

from __future__ import annotations

import gzip
import subprocess
from pathlib import Path

import pytest

from dice_lsp.cuda import checks
from dice_lsp.cuda.checks import CheckContext, Checks, HeaderIndex, parses, unknown_names
from dice_lsp.cuda.holes import find_hole
from dice_lsp.cuda.postprocess import FillContext, postprocess
from dice_lsp.errors import DiceError
from dice_lsp.evals.suite import load_suite
from dice_lsp.toolchain import header_index
from dice_lsp.toolchain.header_index import fallback_names, header_names

KERNEL = """#include <cuda_runtime.h>
#include <cub/cub.cuh>
#define BLOCK 256

// the square of x
__device__ float sq(float x) { return x * x; }

__global__ void reduce(const float* __restrict__ in, float* out, const float4* vec, int n) {
    __shared__ float tile[BLOCK];
    int tid = threadIdx.x;
    int i = blockIdx.x * blockDim.x + tid;
    float acc = 0.0f;
    ‸
    tile[tid] = acc;
    __syncthreads();
    if (tid == 0) out[blockIdx.x] = tile[0];
}

void launch(const float* in, float* out, const float4* vec, int n) {
    reduce<<<(n + BLOCK - 1) / BLOCK, BLOCK>>>(in, out, vec, n);
}
"""

# another function with a half-typed line (the user's own unfinished code elsewhere)
BROKEN_ELSEWHERE = KERNEL.replace("__device__ float sq(float x) { return x * x; }",
                                  "__device__ float sq(float x) {\n    float y = x * ;\n    return x * x;\n}")

MIDLINE = KERNEL.replace("    ‸\n", "    float x = ‸\n")  # the region starts mid-line, after `float x = `
INDEXING = KERNEL.replace("    ‸\n", "    acc = in[i‸\n")  # the region starts inside an indexing expression

# a kernel whose body is being written: `{` typed, nothing after it but the next function
BODY = """#include <cuda_runtime.h>

__global__ void scale(float* out, const float* in, float s, int n) {‸

__global__ void shift(float* out, float d, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] += d;
}
"""
BODY_FILL = "\n    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < n) out[i] = s * in[i];\n}\n"


def context(case: str, headers: HeaderIndex | None = None, local_headers: tuple[str, ...] = ()) -> CheckContext:
    cursor = case.index("‸")
    text = case.replace("‸", "")
    return CheckContext(text, cursor, cursor, headers or fallback_names(), local_headers)


MUST_FAIL = {  # fill: (document, why)
    "float maxval = = ;;": (KERNEL, "two `=` and no initializer"),
    "if ( = (int)threadIdx)ii;": (KERNEL, "an assignment with no left side in the condition"),
    "__syncthreads(tid = threadIdx.x();": (KERNEL, "the call's `(` is never closed, and threadIdx is no function"),
    "out[tid] = tile[x.];];];": (KERNEL, "a member access with no member, then stray `]`"),
    "acc += in[i];\n    }": (KERNEL, "an extra `}` closes the kernel early: the rest of its body is left outside"),
    "];];": (INDEXING, "`in[i` closed once, then a stray `]`"),
    "in[i] * ;": (MIDLINE, "the multiplication has no right operand"),
    BODY_FILL + "}\n": (BODY, "the body closed twice: a stray `}` before the next kernel"),
}


@pytest.mark.parametrize("fill", list(MUST_FAIL))
def test_fills_that_do_not_parse(fill: str) -> None:
    document, why = MUST_FAIL[fill]
    assert not context(document).parses(fill), why


MUST_PASS = {  # fill: (document, why)
    "__syncthreads();": (KERNEL, "a barrier, a CUDA built-in"),
    "float v = __ldg(&in[i]);": (KERNEL, "a read-only load of a parameter, declaring a new local"),
    "atomicAdd(&out[0], acc);": (KERNEL, "an atomic on a parameter with a local"),
    "for (int k = 0; k < n; ++k) acc += in[k];": (KERNEL, "a loop whose variable the fill declares"),
    "float4 q = vec[i];\n    acc += q.x + q.y * q.w;": (KERNEL, "a float4 and its members"),
    "__shared__ typename cub::BlockReduce<float, 256>::TempStorage temp;\n"
    "    acc = cub::BlockReduce<float, 256>(temp).Sum(acc);": (KERNEL, "cub's block reduction, the file includes cub"),
    "acc += sq(in[i]) * BLOCK;": (KERNEL, "a __device__ function and a macro of the file"),
    "if (i < n) {\n        acc = in[i];\n    } else {\n        acc = 0.0f;\n    }": (KERNEL, "blocks open and close"),
    "acc = in[i];": (BROKEN_ELSEWHERE, "the half-typed line is in another function"),
    "in[i] * 2.0f;": (MIDLINE, "finishes the half-typed line"),
    "];": (INDEXING, "closes the indexing expression and the statement"),
    BODY_FILL: (BODY, "a whole body that closes the kernel before the next one"),
}


@pytest.mark.parametrize("fill", list(MUST_PASS))
def test_fills_that_pass(fill: str) -> None:
    document, why = MUST_PASS[fill]
    ctx = context(document)
    assert ctx.parses(fill), why
    assert ctx.unknown_names(fill) == [], why
    assert ctx.check(fill) == Checks(True, True, None)


UNKNOWN = {  # fill: (document, expected unknown names, why)
    "int j = threadIdxx.x;": (KERNEL, [(8, "threadIdxx")], "a misspelt built-in"),
    "if ( = (int)threadIdx)ii;": (KERNEL, [(22, "ii")], "`ii` is declared nowhere (checked though it fails to parse)"),
    "acc += vec[i].bogus_member;": (KERNEL, [(14, "bogus_member")], "a member written nowhere in the file or headers"),
    "acc += helper_from_header(in[i]);": (KERNEL, [(7, "helper_from_header")], "not in the file: a local header's"),
    "acc += in[i]; // uses undefined_thing": (KERNEL, [], "a comment's words are not names"),
    'printf("%d missing_word\\n", tid);': (KERNEL, [], "a string's words are not names"),
    "auto f = [&](int u) { return u + acc; };": (KERNEL, [], "a lambda's parameter is declared by the fill"),
    "const int lane = tid % warpSize, warp = tid / warpSize;": (KERNEL, [], "two declarators"),
    "float y2 = static_cast<float>(n) * __expf(acc);": (KERNEL, [], "a cast and an intrinsic"),
}


@pytest.mark.parametrize("fill", list(UNKNOWN))
def test_unknown_names(fill: str) -> None:
    document, expected, why = UNKNOWN[fill]
    assert context(document).unknown_names(fill) == expected, why


OTHER_KERNEL = """
__global__ void other(float* dst, int count) {
    int gid = blockIdx.x * blockDim.x + threadIdx.x;
    if (gid < count) dst[gid] = 0.0f;
}
"""
TWO_KERNELS = KERNEL + OTHER_KERNEL
PROTOTYPE = "__global__ void translate(const float* image, float* moved, int image_size, int dx);\n" + KERNEL
LATER_LOCAL = KERNEL.replace("    tile[tid] = acc;", "    float bias = 1.0f;\n    tile[tid] = acc + bias;")
METHOD = """struct Accum {
    float total;
    __device__ void add(float v) {
        ‸
    }
};
"""

SCOPED = {  # fill: (document, expected unknown names, why)
    "acc += in[gid];": (TWO_KERNELS, [(10, "gid")], "another kernel's local"),
    "acc += dst[i];": (TWO_KERNELS, [(7, "dst")], "another kernel's parameter"),
    "acc += x;": (TWO_KERNELS, [(7, "x")], "a parameter of the __device__ function above"),
    "acc += image_size;": (PROTOTYPE, [(7, "image_size")], "a parameter of a prototype"),
    "acc += n;": (PROTOTYPE, [], "this kernel's parameter, with a prototype above"),
    "int count = n;": (TWO_KERNELS, [], "declaring a name another kernel also declares is fine"),
    "acc += bias;": (LATER_LOCAL, [(7, "bias")], "declared in this kernel, but only after the hole"),
    "total += v;": (METHOD, [], "a member of the class and the method's parameter"),
    "acc += size;": (KERNEL, [(7, "size")], "`std::size` is no variable of a kernel without `using namespace std`"),
    "float e = CUDART_PI_F * acc;": (KERNEL, [], "a header's macro"),
    "if (cudaGetLastError() != cudaSuccess) return;": (KERNEL, [], "a header's function and enumerator"),
}


@pytest.mark.parametrize("fill", list(SCOPED))
def test_a_variable_must_be_in_scope(fill: str) -> None:
    document, expected, why = SCOPED[fill]
    assert context(document).unknown_names(fill) == expected, why


BRANCHES = """__global__ void norm(const float* in, float* out, int n, bool wide) {
    if (wide) {
        int threads = 256;
        for (int col = threadIdx.x; col < n; col += threads) {
            float val = in[col];
            out[col] = val * val;
        }
    } else {
        ‸
        int threads = 64;
        out[threadIdx.x] = in[threadIdx.x] * threads;
    }
}
"""
GLOBAL_TOO = "__device__ int threads;\n" + BRANCHES


@pytest.mark.parametrize(("document", "fill", "expected", "why"), [
    (BRANCHES, "out[0] = threads;", [(9, "threads")], "declared in the closed branch, and in this one only below"),
    (BRANCHES, "out[0] = val;", [(9, "val")], "a closed loop's local"),
    (BRANCHES, "out[col] = 0.f;", [(4, "col")], "a closed loop's variable"),
    (BRANCHES, "out[0] = in[n - 1];", [], "parameters stay in scope"),
    (BRANCHES, "for (int col = 0; col < n; ++col) out[col] = 0.f;", [], "declaring it again is fine"),
    (GLOBAL_TOO, "out[0] = threads;", [], "a global of that name is in scope"),
])
def test_a_variable_of_a_block_closed_before_the_hole_is_out_of_scope(document: str, fill: str,
                                                                       expected: list[tuple[int, str]],
                                                                       why: str) -> None:
    assert context(document).unknown_names(fill) == expected, why


@pytest.mark.parametrize(("document", "fill"), [
    # a loop without braces whose body is the half-typed line: its variable is in scope there
    ("__global__ void k(int* out) {\n    for (int i = 0; i < 4; ++i)\n        out[i] ‸\n    out[0] = 1;\n}\n",
     "= i;"),
    ("__global__ void k(int* out, int n) {\n    int negs[4];\n    int count = 0;\n    for (int i = 0; i < 4; ++i)\n"
     "        if (out[i] < 0)\n            negs[count++] ‸\n\n    if (count == 3) {\n        out[0] = negs[1];\n"
     "    }\n}\n", "= i;"),
])
def test_names_stay_in_scope_where_the_hole_s_statement_runs_on(document: str, fill: str) -> None:
    checker = context(document)
    assert checker.unknown_names(fill) == []
    assert checker.undeclared(fill) == []


@pytest.mark.parametrize(("key", "start", "end"), [
    ("transformer-engine-torch/0001", 4745, 4766),  # `], is_master_thread);` ends a call the lines above opened
    ("transformer-engine-torch/0001", 4726, 4766),
    ("onnxruntime/0023", 12145, 12150),  # `zp1);`, the last argument of a call over six lines
])
def test_true_lines_that_end_a_statement_the_lines_above_began_pass(key: str, start: int, end: int) -> None:
    """Dev-split files: with the call open at the hole, tree-sitter reads the rest of the file as its arguments,
    so its blocks say nothing there and names declared below stay provided to all the code below."""
    text = load_suite(split="dev").files[key].text
    document = text[:start] + text[end:]
    hole = find_hole(document, start)
    assert hole is not None
    fill_context = FillContext(hole, document[:hole.start], document[hole.end:])
    truth = postprocess(text[start:end], fill_context)
    assert truth is not None
    checker = CheckContext(fill_context.before + fill_context.after, hole.start, hole.start, fallback_names())
    assert checker.check(truth).names


def test_the_name_a_declaration_below_declares_is_not_demanded_of_the_fill() -> None:
    """`__shared__ alignas(16)` typed above an emptied line reads with the next line's declaration as one: its
    own name (`bytes`, where it is declared) is not needed from the fill."""
    document = ("__global__ void k(float* out) {\n    __shared__ alignas(16)\n        float in_sh[32];\n"
                "    __shared__ alignas(16)\n        ‸\n    constexpr int bytes = sizeof(in_sh);\n"
                "    out[0] = bytes;\n}\n")
    assert context(document).undeclared("float out_sh[32];") == []


def test_a_declaration_below_provides_a_name_only_to_the_code_in_its_scope_after_it() -> None:
    """The line `float val = ...;` deleted in the first branch: the second branch's own `val` does not provide the
    name that the first branch's code below the hole uses."""
    text = BRANCHES.replace("        ‸\n", "        float val = in[threadIdx.x];\n").replace(
        "            float val = in[col];", "            ‸")
    at = text.index("‸")
    text = text.replace("‸", "")
    context_ = CheckContext(text, at, at)
    assert context_.undeclared("out[col] = 0.f;") == ["val"]
    assert context_.undeclared("float val = in[col];") == []
    assert context_.check("out[col] = 0.f;").names is False


TYPEDEFS = ("typedef float real;\nnamespace Index { typedef long idx_t; }\n"
            "__global__ void k(real* a, int n) {\n    Index::idx_t id = n;\n    ‸\n    a[id] = 0;\n}\n")


@pytest.mark.parametrize(("fill", "expected"), [
    ("Index::idx_t = n;", [(7, "idx_t")]),  # a declaration that lost its name: an assignment to a type
    ("real = 0.0f;", [(0, "real")]),
    ("real x = 0.0f;", []),
    ("Index::idx_t j = n;", []),
    ("id = n;", []),
])
def test_a_name_the_document_writes_only_as_a_type_is_not_assigned_to(fill: str,
                                                                       expected: list[tuple[int, str]]) -> None:
    assert context(TYPEDEFS).unknown_names(fill) == expected


def test_a_namespace_in_use_brings_its_names() -> None:
    assert context("using namespace std;\n" + KERNEL).unknown_names("acc += size;") == []


REDECLARED = {  # fill: (expected, why)
    "int n = 4;": ([(4, "n")], "the kernel's parameter, declared again in its body's own block"),
    "float acc = 1.0f;": ([(6, "acc")], "a local of the same block"),
    "for (int i = 0; i < n; ++i) acc += in[i];": ([], "a loop's variable has its own scope"),
    "if (n > 0) {\n        int tid = 0;\n        acc += tid;\n    }": ([], "a nested block may shadow"),
    "float v = acc;": ([], "a new name"),
}


@pytest.mark.parametrize("fill", list(REDECLARED))
def test_a_fill_must_not_declare_a_name_its_block_has(fill: str) -> None:
    expected, why = REDECLARED[fill]
    ctx = context(KERNEL)
    assert ctx.redeclared(fill) == expected, why
    assert ctx.check(fill) == Checks(True, not expected), why


def test_names_from_local_headers() -> None:
    header = "#pragma once\n__device__ float helper_from_header(float v) { return v; }\n"
    fill = "acc += helper_from_header(in[i]);"
    assert context(KERNEL, local_headers=(header,)).unknown_names(fill) == []


def test_offsets_are_string_indices_past_non_ascii_text() -> None:
    """The document has a non-ASCII comment before the region and the fill has one before the bad name."""
    document = KERNEL.replace("// the square of x", "// le carré de x, ½")
    ctx = context(document)
    assert ctx.parses("/* é */ int j = threadIdxx.x;")
    assert ctx.unknown_names("/* é */ int j = threadIdxx.x;") == [(16, "threadIdxx")]
    assert not ctx.parses("/* é */ float maxval = = ;;")


def test_the_plain_functions_match_the_context() -> None:
    cursor = KERNEL.index("‸")
    text = KERNEL.replace("‸", "")
    assert parses(text, cursor, cursor, "__syncthreads();")
    assert not parses(text, cursor, cursor, "float maxval = = ;;")
    assert unknown_names(text, cursor, cursor, "int j = threadIdxx.x;", fallback_names()) == [(8, "threadIdxx")]


def test_a_selection_region_is_replaced() -> None:
    """The region's old text is not part of the document the fill is judged in."""
    text = KERNEL.replace("‸", "float acc2 = = ;")
    start = text.index("float acc2")
    end = start + len("float acc2 = = ;")
    ctx = CheckContext(text, start, end, fallback_names())
    assert ctx.parses("acc += in[i];")
    assert not ctx.parses("acc += in[i]")  # the missing `;` touches the fill
    assert ctx.unknown_names("acc2 += 1.0f;") == [(0, "acc2")]  # declared only in the replaced text


def test_checks_result() -> None:
    result = Checks(parses=True, names=False, compiles=None)
    assert result.passed == 1
    assert result.to_json() == {"parses": True, "names": False, "types": None, "compiles": None}
    assert Checks(True, True, None, True).passed == 3 and Checks(True, True, None, False).passed == 2
    assert Checks(True, True, True).passed == 3


# ---------------------------------------------------------------------------------------------- header index

def test_fallback_index_loads() -> None:
    assert header_index.FALLBACK.stat().st_size < 400_000
    index = fallback_names()
    assert {"__syncthreads", "__shfl_down_sync", "__ldg", "__expf", "threadIdx", "atomicAdd", "float4",
            "cudaMalloc", "CUDART_PI_F", "FLT_MAX", "stderr", "cudaSuccess"} <= index.globals
    assert {"BlockReduce", "numeric_limits", "thread_block", "size", "data"} <= index.scoped - index.globals
    assert {"x", "sync"} <= index.fields
    # the headers' own parameters and locals are not names a kernel can use
    assert not {"i", "tid", "idx", "lane", "tmp"} & (index.globals | index.scoped)
    assert not any(line.startswith("#") for line in index.globals | index.scoped | index.fields)


def test_no_nvcc_uses_the_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(configured: str | None = None) -> Path:
        raise DiceError("nvcc not found")

    monkeypatch.setattr("dice_lsp.toolchain.nvcc.find_nvcc", missing)
    header_names.cache_clear()
    try:
        assert header_names(None) == fallback_names()
    finally:
        header_names.cache_clear()


def test_header_index_is_built_with_nvcc_and_cached(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from dice_lsp.toolchain.nvcc import find_nvcc

    try:
        nvcc = find_nvcc()
    except DiceError as exc:
        pytest.skip(f"no nvcc here ({exc}): the index cannot be built")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    header_names.cache_clear()
    try:
        names = header_names(nvcc)
        assert {"__syncthreads", "__shfl_down_sync", "__ldg", "threadIdx", "atomicAdd", "CUDART_PI_F", "FLT_MAX",
                "__CUDA_ARCH__"} <= names.globals
        assert {"BlockReduce", "thread_block"} <= names.scoped
        assert names.arity["cudaMemcpy"] == (4, 4) and names.arity["__shfl_down_sync"] == (3, 4)
        cached = header_index.index_path(nvcc)
        assert cached.is_relative_to(tmp_path) and cached.is_file()
        assert gzip.decompress(cached.read_bytes()).decode().splitlines() == names.lines()

        def no_process(*args: object, **kwargs: object) -> None:
            raise AssertionError("nvcc ran although its index is cached")

        monkeypatch.setattr(subprocess, "run", no_process)
        monkeypatch.setattr(subprocess, "Popen", no_process)
        header_names.cache_clear()
        assert header_names(nvcc) == names
    finally:
        header_names.cache_clear()



VOID_KERNEL = "__global__ void k(float* out, int n) {\n    \n}\n"
VALUE_FUNCTION = "__device__ int twice(int n) {\n    \n}\n"


@pytest.mark.parametrize(("text", "fill", "ok"), [
    (VOID_KERNEL, "return n;", False),  # a kernel returns nothing
    (VOID_KERNEL, "if (n < 0) return;", True),
    (VALUE_FUNCTION, "return 2 * n;", True),
    (VOID_KERNEL, "auto f = [](int x) { return x; };", True),  # a lambda's return is its own
])
def test_a_value_returned_from_a_void_function_does_not_pass(text: str, fill: str, ok: bool) -> None:
    at = text.index("    \n") + 4
    assert parses(text, at, at, fill) is ok


USES_TID = ("__global__ void k(float* out, int n) {\n    \n    if (tid < n) out[tid] = 0.f;\n}\n")


@pytest.mark.parametrize(("fill", "missing"), [
    ("int tid = blockIdx.x * blockDim.x + threadIdx.x;", []),
    ("int i = blockIdx.x * blockDim.x + threadIdx.x;", ["tid"]),  # the code below needs `tid`
    ("__syncthreads();", ["tid"]),
])
def test_a_fill_must_declare_what_the_code_after_it_needs(fill: str, missing: list[str]) -> None:
    at = USES_TID.index("    \n") + 4
    context = CheckContext(USES_TID, at, at)
    assert context.undeclared(fill) == missing
    assert context.check(fill).names is (not missing)


HALF_TYPED_DECLARATION = ("void launch(const int n, int threads) {\n"
                          "    auto dv = std::div(n, threads);\n"
                          "    const int num_bl\n"
                          "    const int grid = (num_blocks == 0 ? 1 : num_blocks);\n"
                          "    dim3 g(grid, 1);\n}\n")


@pytest.mark.parametrize(("fill", "missing"), [
    ("ocks = (n + threads - 1) / threads;", []),
    ("_size = 0;", ["num_blocks"]),  # declares `num_bl_size`: the code below still needs `num_blocks`
    ("ock = 1;", ["num_blocks"]),
])
def test_a_half_typed_declaration_must_be_finished_as_the_code_after_it_uses_it(fill: str,
                                                                                missing: list[str]) -> None:
    """A half-typed line that merges with the next in tree-sitter's eyes hides the function's declarations from
    the check above; the word typed before the cursor still says which needed name the line declares."""
    at = HALF_TYPED_DECLARATION.index("num_bl\n") + len("num_bl")
    context = CheckContext(HALF_TYPED_DECLARATION, at, at)
    assert context.undeclared(fill) == missing
    assert context.check(fill).names is (not missing)


HALF_TYPED_LINES = {
    # a loop header typed up to its condition takes the next lines into it; the functions after the kernel
    # then read as part of recovery's error, so nothing after the hole is seen as declared
    "for": ("__global__ void k(float* out, int n) {\n"
            "    for (int iter = 0; ‸\n"
            "        const int row = iter * 2;\n"
            "        float v = out[row];\n"
            "        out[row] = helper(v);\n"
            "    }\n"
            "}\n"
            "__device__ float helper(float x) { return x; }\n"),
    # a qualifier typed alone makes the next line's declaration its own
    "shared": ("__global__ void k(float* out) {\n"
               "    __shared__ ‸\n"
               "    __shared__ float s_max;\n"
               "    s_max = out[0]; s_tid = 0;\n"
               "    out[s_tid] = s_max;\n"
               "}\n"),
    # the deleted rest of the line declared `v`, which the line below needs
    "declaration": ("__global__ void k(float* out, int n) {\n"
                    "    float ‸\n"
                    "    out[0] = v;\n"
                    "}\n"),
}


UNPARSED_KERNEL = """typedef float real;
extern "C" __global__ void computeEnergy(const float* __restrict__ posq, real* __restrict__ energyBuffer
#ifdef USE_CUTOFF
        , const int* __restrict__ tiles
#endif
        PARAMETER_ARGUMENTS) {
    real energy = 0;
    for (int tile = 0; tile < 4; tile++) {
        real tempEnergy = posq[tile];
        energy += tempEnergy;
    }
    if (threadIdx.x < 32) {
        real tempEn‸
        const real scale = 1.0f;
        energy += scale * tempEnergy;
    }
    energyBuffer[blockIdx.x] = energy;
}
"""


@pytest.mark.parametrize(("fill", "missing"), [
    ("actionScale = 0.0f;", ["tempEnergy"]),  # declares `tempEnactionScale`; the code below uses `tempEnergy`
    ("ergy = 0.0f;", []),
    ("ergy;", []),
])
def test_a_half_typed_declaration_in_a_function_tree_sitter_cannot_read_must_be_finished(
        fill: str, missing: list[str]) -> None:
    """`#ifdef`s through the parameter list (OpenMM's kernels): no function parses, so the names are judged by
    words; the earlier loop's own `tempEnergy` (a closed block) does not provide the one below."""
    checker = context(UNPARSED_KERNEL)
    assert checker.undeclared(fill) == missing
    assert checker.check(fill).names is (not missing)


@pytest.mark.parametrize(("case", "fill", "missing"), [
    ("for", "iter < n; ++iter) {", []),  # `iter` is the typed header's; `row`, `v`, `helper` are declared after
    ("shared", "int s_tid;", []),
    ("shared", "float s_sum;", ["s_tid"]),
    ("declaration", "v = 0.f;", []),
    ("declaration", "w = 0.f;", ["v"]),
])
def test_a_half_typed_line_that_reads_as_one_with_the_next_demands_only_what_the_deleted_text_declared(
        case: str, fill: str, missing: list[str]) -> None:
    document = HALF_TYPED_LINES[case]
    at = document.index("‸")
    text = document.replace("‸", "")
    context = CheckContext(text, at, at)
    assert context.undeclared(fill) == missing
    assert context.check(fill).names is (not missing)


def test_names_a_macro_or_the_file_declares_are_not_demanded() -> None:
    text = ("#define LOOP(i, n) for (int i = 0; i < n; ++i)\n"
            "__global__ void k(float* out, int n) {\n    \n    LOOP(j, n) out[j] = 0.f;\n}\n")
    at = text.index("    \n") + 4
    assert CheckContext(text, at, at).undeclared("__syncthreads();") == []


OTHER_KERNEL = ("// idx: the element this thread writes\n"
                "__global__ void first(float* out, int n) {\n"
                "    int idx = threadIdx.x;\n    out[idx] = table[idx];\n}\n")


@pytest.mark.parametrize(("kernel", "fill", "missing"), [
    # another kernel's local (and a comment's word) provides nothing here: the fill must declare `idx`
    ("__global__ void k(float* out) {\n    \n    out[idx] = 0.f;\n}\n", "__syncthreads();", ["idx"]),
    ("__global__ void k(float* out) {\n    \n    out[idx] = 0.f;\n}\n", "int idx = threadIdx.x;", []),
    # `table` is used by the other kernel without being declared there: a global from a header not shown
    ("__global__ void k(float* out) {\n    \n    out[0] = table[0];\n}\n", "__syncthreads();", []),
    # declared in this kernel after the hole (in a later block): not demanded of the fill
    ("__global__ void k(float* out) {\n    \n    { int idx = 1; out[idx] = 0.f; }\n}\n", "__syncthreads();", []),
])
def test_names_other_functions_declare_for_themselves_are_demanded(kernel: str, fill: str,
                                                                   missing: list[str]) -> None:
    text = OTHER_KERNEL + kernel
    at = text.index("    \n") + 4
    assert CheckContext(text, at, at).undeclared(fill) == missing


STATE = "struct State {\n    int2 _storage;\n    __device__ void flip() {\n        _storage.y ^= 1;\n    }\n};\n"


@pytest.mark.parametrize(("text", "ok"), [
    (STATE + "__global__ void k(int* out) {\n    \n}\n", False),  # another class's member is no variable here
    (STATE + "__global__ void k(int* out, State s) {\n    \n}\n", False),  # (`s._storage` would be)
    ("int2 _storage;\n" + STATE + "__global__ void k(int* out) {\n    \n}\n", True),  # a global of that name
    ("struct State {\n    int2 _storage;\n    __device__ void reset() {\n    \n    }\n};\n", True),  # own member
    (STATE + "struct Next : State {\n    __device__ void step() {\n    \n    }\n};\n", True),  # maybe a base's
    (STATE + "__device__ void State::reset() {\n    \n}\n", True),  # an out-of-line method
])
def test_data_members_are_variables_only_in_their_class(text: str, ok: bool) -> None:
    at = text.index("    \n") + 4
    assert (CheckContext(text, at, at).unknown_names("_storage.x = 0;") == []) is ok


def test_a_midline_fill_that_leaves_its_line_broken_does_not_parse() -> None:
    text = "__global__ void k(float* x, int n) {\n    int m = (n + \n    x[0] = m;\n}\n"
    at = text.index("(n + ") + len("(n + ")
    assert parses(text, at, at, "1) / 2;") is True
    assert parses(text, at, at, "1 /") is False


@pytest.mark.parametrize(("fill", "ok"), [
    ("*out = 0x;", False),  # `0x`: a hex literal with no digits, read by tree-sitter as 0 with suffix `x`
    ("*out = 1.x;", False),
    ("*out = 0x1F;", True),
    ("*out = 1.5e-3f;", True),
    ("*out = 10_units;", True),  # a user-defined literal: its suffix starts with `_`
    ("float[i] = out[i];", False),  # a structured binding needs `auto`
    ("auto [a, b] = pair;", True),
    ("for (int i = 0; i < n; ++i++) {}", False),  # `i++` is a value: it cannot be incremented
    ("for (int i = 0; i < n; ++i) {}", True),
    ("++(*out);", True),
])
def test_constructs_the_grammar_accepts_and_no_compiler_does_not_pass(fill: str, ok: bool) -> None:
    at = VOID_KERNEL.index("    \n") + 4
    assert parses(VOID_KERNEL, at, at, fill) is ok
    if not ok:  # re-masking gets the construct's span to denoise again
        assert CheckContext(VOID_KERNEL, at, at).error_spans(fill)


@pytest.mark.parametrize(("line", "fill", "ok"), [
    ("    float y = 1.", "x / 2;", False),  # the literal `1.x` is the fill's doing
    ("    float y = 1.", "5f / 2;", True),
    ("    int ", "n = 0;", False),  # `n` is the kernel's parameter: declared twice
    ("    int ", "m = 0;", True),
])
def test_a_midline_fill_is_judged_with_the_start_of_its_line(line: str, fill: str, ok: bool) -> None:
    text = f"__global__ void k(float* out, int n) {{\n{line}\n    out[0] = 0.f;\n}}\n"
    at = text.index(line) + len(line)
    assert CheckContext(text, at, at).check(fill).passed == (2 if ok else 1)


SCAN = ("__device__ int total(const int* counts, int n, int upto) {\n    return 0;\n}\n"
        "__device__ float blend(float a, float b, float t = 0.5f);\n"
        "__device__ int sum_all(int first, ...);\n"
        "__global__ void k(const int* counts, int n, int* out) {\n    \n}\n")


@pytest.mark.parametrize(("fill", "wrong"), [
    ("out[0] = total(counts, n, 4);", []),
    ("out[0] = total(counts);", ["total"]),  # too few arguments for the one declaration there is
    ("out[0] = blend(1.f, 2.f) + blend(1.f, 2.f, 0.f);", []),  # a default argument
    ("out[0] = blend(1.f);", ["blend"]),
    ("out[0] = sum_all(1, 2, 3, 4);", []),  # variadic
    ("out[0] = max(1, 2);", []),  # not the document's: the headers may overload it
])
def test_calls_to_the_documents_functions_take_a_number_of_arguments_they_declare(fill: str,
                                                                                    wrong: list[str]) -> None:
    at = SCAN.index("    \n}") + 4
    context = CheckContext(SCAN, at, at, HeaderIndex.from_lines(["max"]))
    assert [name for _, name in context.wrong_arity(fill)] == wrong
    assert context.check(fill).names is (not wrong)


CUDA_ARITIES = HeaderIndex.from_lines(["cudaMemcpy", "(cudaMemcpy 4 4", "__shfl_down_sync", "(__shfl_down_sync 3 4",
                                       "max", "(max 2 2", "printf", "(printf 1 inf", "cudaMemcpyDeviceToHost"])


@pytest.mark.parametrize(("document", "fill", "wrong"), [
    (SCAN, "cudaMemcpy(out, counts, n, cudaMemcpyDeviceToHost);", []),
    (SCAN, "cudaMemcpy(out);", ["cudaMemcpy"]),  # shown on a real file as `cudaMemcpy(params.h())`
    (SCAN, "out[0] = __shfl_down_sync(0xffffffff, n, 1);", []),
    (SCAN, "out[0] = __shfl_down_sync(n, 1);", ["__shfl_down_sync"]),
    (SCAN, 'printf("%d %d\\n", n, n);', []),  # variadic
    (SCAN, "out[0] = max(n);", []),  # a common name projects overload in headers not read here: no verdict
    ("#define cudaMemcpy(a) my_copy(a)\n" + SCAN, "cudaMemcpy(out);", []),  # the document's own
])
def test_calls_to_cuda_functions_of_the_headers_take_a_number_of_arguments_they_declare(
        document: str, fill: str, wrong: list[str]) -> None:
    at = document.index("    \n}") + 4
    assert [name for _, name in CheckContext(document, at, at, CUDA_ARITIES).wrong_arity(fill)] == wrong


def test_header_arities_travel_in_the_index_file() -> None:
    assert HeaderIndex.from_lines(CUDA_ARITIES.lines()) == CUDA_ARITIES
    assert CUDA_ARITIES.arity["printf"] == (1, float("inf")) and CUDA_ARITIES.arity["cudaMemcpy"] == (4, 4)


def test_a_name_the_headers_declare_only_in_a_namespace_is_demanded_of_the_fill() -> None:
    text = "__global__ void k(int* out) {\n    \n    out[0] = count;\n}\n"
    at = text.index("    \n") + 4
    headers = HeaderIndex(globals=frozenset({"printf"}), scoped=frozenset({"count"}))  # std::count
    assert CheckContext(text, at, at, headers).undeclared("__syncthreads();") == ["count"]
    with_using = "using namespace std;\n" + text
    at = with_using.index("    \n") + 4
    assert CheckContext(with_using, at, at, headers).undeclared("__syncthreads();") == []


@pytest.mark.parametrize(("fill", "unknown"), [
    ("or = 0;", ["_storageor"]),  # glued onto the typed word: the whole identifier is judged
    ("_t = true;", ["_storage_t"]),
    (".y ^= 1;", []),
])
def test_a_fill_that_glues_onto_the_typed_word_is_judged_as_the_whole_identifier(fill: str,
                                                                                 unknown: list[str]) -> None:
    text = "__global__ void k(int* out) {\n    int2 _storage = make_int2(0, 0);\n    _storage\n    out[0] = 0;\n}\n"
    at = text.index("    _storage\n") + len("    _storage")
    assert [name for _, name in CheckContext(text, at, at).unknown_names(fill)] == unknown


# Top-level macro calls that take an operator make tree-sitter give up on the whole file (one ERROR node): a
# fill there "sits in garbage left as it was" by the rules above, so any fill would pass.
OPERATOR_MACROS = "".join(f"BINARY_OP({t}, add, +);\nBINARY_OP({t}, mul, *);\n" for t in ("int8_t", "uint8_t"))
OPERATOR_MACROS += "HALF_OP(add, +);\nHALF_OP(mul, *);\n"
FILL_KERNEL = "__global__ void k(float* out, int n) {\n    int i = threadIdx.x;\n    \n    out[i] = 0.f;\n}\n"
FILLS = {"out[i] = 1.f;": True, "__syncthreads();": True, "out[i": False, "float maxval = = ;;": False,
         "}": False}


@pytest.mark.parametrize("text", [
    FILL_KERNEL + "\n" + OPERATOR_MACROS,  # the macros after the kernel
    OPERATOR_MACROS + "\n" + FILL_KERNEL,  # before it: tree-sitter reads the kernel itself as broken code
    "namespace ops {\n" + OPERATOR_MACROS + "\ntemplate <typename T>\n" + FILL_KERNEL + "}  // namespace ops\n",
])
def test_a_fill_in_a_file_tree_sitter_gives_up_on_is_judged_in_its_own_definition(text: str) -> None:
    at = text.index("    \n") + 4
    assert checks.parser().parse(text.encode()).root_node.type == "ERROR"  # the case this is about
    context = CheckContext(text, at, at)
    assert {fill: context.parses(fill) for fill in FILLS} == FILLS
    assert context.error_spans("out[i] = = 1;") == [(9, 10)]  # re-masking gets the broken part of the fill


def test_a_fill_in_an_error_it_cannot_be_judged_apart_from_adds_no_error_inside_it() -> None:
    text = FILL_KERNEL.removesuffix("}\n") + "\n" + OPERATOR_MACROS  # the kernel never closes: no definition
    at = text.index("    \n") + 4
    context = CheckContext(text, at, at)
    assert checks.top_level_span(text.encode(), at) is None
    assert [context.parses(fill) for fill in ("out[i] = 1.f;", "__syncthreads();")] == [True, True]
    assert [context.parses(fill) for fill in ("out[i", "float maxval = = ;;")] == [False, False]


@pytest.mark.parametrize(("text", "definition"), [
    ("int g;\n__global__ void k(int* o) {\n    ‸\n}\nint h;\n", "\n__global__ void k(int* o) {\n    ‸\n}"),
    ("namespace a { namespace b {\nstruct S { int x; };\n__device__ void f() {\n    ‸\n}\n} }\n",
     "\n__device__ void f() {\n    ‸\n}"),
    ('extern "C" {\n__global__ void k() { const char* s = "}"; /* } */ // }\n    ‸\n}\n}\n',
     '\n__global__ void k() { const char* s = "}"; /* } */ // }\n    ‸\n}'),
    ("#if FAST\n__global__ void k(int* o) {\n#else\n__global__ void k(int* o, int n) {\n#endif\n    ‸\n}\n"
     "#define OPEN {\n", "#if FAST\n__global__ void k(int* o) {\n#else\n__global__ void k(int* o, int n) {\n#endif\n"
     "    ‸\n}"),
    ("struct S { int x; };\n‸\n", None),  # at top level
    ("__global__ void k(int* o) {\n    ‸\n", None),  # the braces never close
])
def test_the_top_level_definition_that_holds_a_position(text: str, definition: str | None) -> None:
    data = text.replace("‸", "").encode()
    span = checks.top_level_span(data, text.index("‸"))
    assert (None if span is None else data[span[0]:span[1]].decode()) == (
        None if definition is None else definition.replace("‸", ""))


@pytest.mark.parametrize(("fill", "ok"), [
    ("out[n];", False),  # a statement that does nothing: compiles with a warning, never meant
    ("n + 1;", False),
    ("*out;", False),
    ("(out[0]);", False),
    ("__syncthreads;", False),  # the function named, not called
    ("__syncthreads();", True),
    ("out[n] = 1.f;", True),
    ("++n;", True),
    ("(void)n;", True),  # does nothing on purpose
    ("NO_DEVICE_CODE;", True),  # an all-caps name: a macro that may expand to a statement
    ("std::cout << n;", True),  # a stream's `<<`
])
def test_a_statement_that_does_nothing_does_not_pass(fill: str, ok: bool) -> None:
    at = VOID_KERNEL.index("    \n") + 4
    assert parses(VOID_KERNEL, at, at, fill) is ok
    if not ok:
        assert CheckContext(VOID_KERNEL, at, at).error_spans(fill)  # re-masking denoises the statement again


@pytest.mark.parametrize(("fill", "ok"), [
    ("for (int i = 0; i < n; i) out[i] = 0.f;", False),  # the loop never moves on by itself
    ("for (int i = 0; i < n; i + 1) out[i] = 0.f;", False),
    ("for (int i = 0; i < n; (i)) out[i] = 0.f;", False),
    ("for (int i = 0; i < n; out[i]) out[i] = 0.f;", False),
    ("for (int i = 0; i < n; i++) out[i] = 0.f;", True),
    ("for (int i = 0; i < n; i += 4) out[i] = 0.f;", True),
    ("for (int i = 0, j = n; i < j; ++i, --j) out[i] = out[j];", True),
    ("for (int i = 0; i < n; ++i, out) out[i] = 0.f;", True),  # one part moves the loop on
    ("for (int i = 0; i < n;) out[i++] = 0.f;", True),  # no update: the body moves it
])
def test_a_loop_update_that_does_nothing_does_not_pass(fill: str, ok: bool) -> None:
    at = VOID_KERNEL.index("    \n") + 4
    assert parses(VOID_KERNEL, at, at, fill) is ok
    if not ok:  # re-masking denoises the update alone again
        spans = CheckContext(VOID_KERNEL, at, at).error_spans(fill)
        assert spans and all(fill[lo:hi] in ("i", "i + 1", "(i)", "out[i]") for lo, hi in spans), spans


@pytest.mark.parametrize(("fill", "ok"), [
    ("if (n == 0);", False),  # the statement after it runs either way
    ("if (n <= 0) ;", False),
    ("if (n == 0) return;", True),
    ("if (n == 0); else out[0] = 0.f;", True),  # odd, but the else does something
    ("while (n == 0);", True),  # a loop may spin on purpose
    ("if (n == 0) {}", True),  # an empty block is where the user writes next
])
def test_an_if_with_an_empty_body_does_not_pass(fill: str, ok: bool) -> None:
    at = VOID_KERNEL.index("    \n") + 4
    assert parses(VOID_KERNEL, at, at, fill) is ok
    if not ok:  # re-masking rewrites the whole statement
        assert CheckContext(VOID_KERNEL, at, at).error_spans(fill)


@pytest.mark.parametrize(("fill", "ok"), [
    ("gflags  false;", False),  # tree-sitter: a variable `false` of type `gflags`
    ("float nullptr = 0.f;", False),
    ("bool done = false;", True),
    ("float this_scale = 1.f;", True),
])
def test_a_value_keyword_is_no_variable_name(fill: str, ok: bool) -> None:
    at = VOID_KERNEL.index("    \n") + 4
    assert parses(VOID_KERNEL, at, at, fill) is ok


def test_a_mid_line_fill_is_judged_with_the_statement_it_finishes() -> None:
    text = "__global__ void k(float* out, int n) {\n    out[n] = \n}\n"
    at = text.index("= ") + 2
    assert parses(text, at, at, "0;") is True  # `out[n] = 0;`
    text = "__global__ void k(float* out, int n) {\n    out[n]\n}\n"
    at = text.index("[n]") + 3
    assert parses(text, at, at, ";") is False  # `out[n];`


TWO_STATEMENTS = "__global__ void k(float* c, const float* a, int n) {\n    int i = 0;\n    \n    c[i] = a[i];\n}\n"
SPLIT_CALL = "__global__ void k(float* c, const float* a, int n) {\n    int i = 0;\n    \n        a[i], a[i + 1]);\n}\n"


@pytest.mark.parametrize(("text", "fill", "ok"), [
    (TWO_STATEMENTS, "int64_t end =", False),  # takes `c[i] = a[i];` as its initialiser, and parses
    (TWO_STATEMENTS, "c[i] = a[i] +", False),
    (TWO_STATEMENTS, "float v = f(", False),  # (no `)` anywhere: an error elsewhere fails it already)
    (TWO_STATEMENTS, "c[i] = 0.f;", True),
    (TWO_STATEMENTS, "if (i < n)", True),  # a guard for the line below: a statement of its own
    (TWO_STATEMENTS, "c[i] = 0.f;  // a +", True),
    (SPLIT_CALL, "c[i] = fmaxf(", True),  # the line below cannot stand alone: the fill opens what it closes
])
def test_a_fill_that_takes_the_next_statement_as_its_rest_does_not_pass(text: str, fill: str, ok: bool) -> None:
    at = text.index("    \n    ") + 4 if "    \n    c" in text else text.index("    \n        ") + 4
    assert parses(text, at, at, fill) is ok
    if not ok and not fill.endswith("("):  # re-masking denoises the end that wants an operand
        assert CheckContext(text, at, at).error_spans(fill) == [(len(fill) - 1, len(fill))]


@pytest.mark.parametrize(("text", "open_at_x"), [
    ("#if 0\nold();\n#else\n__global__ void k() {\n    x();\n#endif\n", 1),  # `#if 0`: its #else is the code
    ("#if A\nvoid f(int a) {\n#elif B\nvoid f(long a) {\n#else\nvoid f() {\n#endif\n    x;\n}\n", 1),
    ("void f() {\n#define OPEN {\n    const char* s = \"{\"; // {\n    x;\n}\n", 1),
    ("namespace a {\nvoid f() {}\nx;\n}\n", 1),
])
def test_braces_open_at_a_position_read_one_branch_of_each_conditional(text: str, open_at_x: int) -> None:
    from dice_lsp.cuda.functions import open_braces

    data = text.encode()
    assert open_braces(data, data.index(b"x")) == open_at_x


@pytest.mark.parametrize(("fill", "ok"), [
    ("out[n] = out[n];", False),  # assigned to itself
    ("out, n;", False),  # a comma of names
    ("out[0] = 1.f, n++;", True),
    ("out[n] += out[n];", True),
    ("int m = m * 2;", False),  # read before it is set
    ("int m = n * 2;", True),
    ("int m = sizeof(m);", True),
    ("int n2 = Cfg::n2;", True),  # another `n2`
])
def test_self_assignments_and_self_initialisations_do_not_pass(fill: str, ok: bool) -> None:
    at = VOID_KERNEL.index("    \n") + 4
    assert parses(VOID_KERNEL, at, at, fill) is ok


@pytest.mark.parametrize(("fill", "ok"), [
    # shown on real files (docs/bench-logs/real_code/set3_*), then withheld:
    ("int warpMask[0] = n;", False),  # an array from a value: no compiler takes it
    ("float items[0];", False),  # a zero-length local array
    ("const int y, m = 1;", False),  # a constant without a value
    ("auto z;", False),
    ("int blocks = 1.8;", False),  # the fraction is dropped (-Wliteral-conversion)
    ("unsigned int u = 0.5f;", False),
    ("int e = 1e-3;", False),
    ("int m = n = 0;", False),  # a declaration that assigns another variable
    ("out[0] = 10[1];", False),  # a number indexed by a number
    ('printf("<%d, %d> %s");', False),  # the format asks for three values, none given
    ('printf("%d\\n", n, n);', False),
    ("out[n] = (out[n]);", False),  # assigned to itself, in parentheses
    ("out[n] -= out[n];", False),  # a constant written the long way
    ("n ^= n;", False),
    ("Iterator<float, int>;", False),  # a template named, not used
    ("typename Offset;", False),  # a type alone declares nothing
    ("int;", False),
    ("if (n >= n) out[0] = 1;", False),  # an operator between an operand and itself
    ("out[0] = n - n;", False),
    ("if (0 == 0) out[0] = 1;", False),  # `if (0 == 0) {` was shown on the dev split
    # what users write, kept:
    ("out[0] = (out[n] != out[n]);", True),  # how code tests for NaN
    ("out[0] = NUM - NUM;", True),  # macros (real kernels write it)
    ("out[0] = out[n] - out[n - 1];", True),
    ("int w[4] = {1, 2};", True),
    ('char s[8] = "abc";', True),
    ("const int q = 3;", True),
    ("int two = 2.0;", True),  # no fraction lost
    ("size_t m = 1e3;", True),
    ("float f = 1.5;", True),
    ("float v = out[n] = 0.f;", True),  # storing on the way (`T val = buffer[tid] = init;` in real kernels)
    ("n = out[0] = 0;", True),  # a chain as a statement
    ('printf("%d %f\\n", n, out[n]);', True),
    ('printf("%5.*f%%\\n", n, out[n]);', True),  # `*` takes a value, `%%` none
    ('fprintf(stderr, "%d of %d\\n", n, n);', True),
    ('snprintf(buf, 8, "%d");', False),
    ("out[n] *= out[n];", True),  # squares
])
def test_constructs_no_compiler_takes_or_no_one_writes_do_not_pass(fill: str, ok: bool) -> None:
    at = VOID_KERNEL.index("    \n") + 4
    assert parses(VOID_KERNEL, at, at, fill) is ok
    if not ok:
        assert CheckContext(VOID_KERNEL, at, at).error_spans(fill)  # re-masking denoises it again


@pytest.mark.parametrize(("fill", "unknown"), [
    ("out[i] = (in) out[i];", ["in"]),  # a variable cast to, as if it were a type (shown on a real file)
    ("in x;", ["in"]),
    ("out[i] = (float) in[i];", []),
    ("out[i] = in[i] * BLOCK;", []),  # a template's constant
    ("cub::BlockReduce<float, BLOCK> reduce;", []),
])
def test_a_variable_written_as_a_type_is_an_unknown_name(fill: str, unknown: list[str]) -> None:
    text = ("template <int BLOCK>\n__global__ void k(float* out, const float* in, int n) {\n"
            "    int i = threadIdx.x;\n    \n}\n")
    at = text.index("    \n}") + 4
    found = [name for _, name in CheckContext(text, at, at, HeaderIndex.from_lines(["::cub", "cub"]))
             .unknown_names(fill)]
    assert [name for name in found if name not in ("BlockReduce",)] == unknown


@pytest.mark.parametrize(("text", "fill", "unknown"), [
    ("#include <vector>\n__global__ void k(float* out, int n) {\n    std::vector<int> v;\n    \n}\n",
     "v.push_back(std);", ["std"]),  # a namespace is no value
    ("__global__ void k(float* out, int n) {\n    namespace cg = cooperative_groups;\n"
     "    auto block = cg::this_thread_block();\n    \n}\n", "out[0] = cg;", ["cg"]),
    ("__global__ void k(float* out, int n) {\n    float std = 1.f;\n    \n}\n",
     "out[n] = std;", []),  # a standard deviation named `std`
    ("__global__ void k(float* out, int n) {\n    out[0] = std::max(out[0], 0.f);\n    \n}\n",
     "out[n] = std::min(out[n], 1.f);", []),
])
def test_a_namespace_written_as_a_value_is_an_unknown_name(text: str, fill: str, unknown: list[str]) -> None:
    at = text.index("    \n}") + 4
    found = [name for _, name in CheckContext(text, at, at, HeaderIndex.from_lines(["max", "min", "push_back"]))
             .unknown_names(fill)]
    assert found == unknown


@pytest.mark.parametrize(("typed", "fill", "names"), [
    ("return num_examp", "(out, 1);", False),  # a half-typed `num_examples` called as it is
    ("return num_examp", ";", False),
    ("return num_examp", "les;", True),  # finished
    ("MY_HEADER_MACRO", "(out);", True),  # a whole name typed once (a header's macro, not read here): the user's
    ("out[0] = num_examples", " + 1;", True),
    ("ret", ".copyTo(out, 1);", False),  # the start of `return`, taken for a variable (shown on a real file)
    ("ret", "urn;", True),
    ("con", "st int m = 1;", True),
])
def test_the_word_typed_before_the_hole_must_be_a_name_when_the_fill_ends_it(typed: str, fill: str,
                                                                             names: bool) -> None:
    text = "__global__ void k(float* out, int num_examples) {\n    " + typed + "\n}\n"
    at = text.index(typed) + len(typed)
    assert CheckContext(text, at, at).check(fill).names is names
