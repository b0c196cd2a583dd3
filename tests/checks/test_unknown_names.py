"""Golden cases of the rule on names that resolve nowhere, and on variables out of scope at the hole."""

from __future__ import annotations

import pytest

from dice_lsp.completion.checks.context import CheckContext
from dice_lsp.completion.checks.rules.unknown_names import RULE
from dice_lsp.toolchain.header_index import HeaderIndex, fallback_names
from tests.checks.documents import KERNEL, at_blank, context

UNKNOWN = {  # fill: (document, expected unknown names, why)
    "int j = threadIdxx.x;": (KERNEL, [(8, "threadIdxx")], "a misspelt built-in"),
    "if ( = (int)threadIdx)ii;": (KERNEL, [(22, "ii")], "`ii` is declared nowhere (though it fails to parse)"),
    "acc += vec[i].bogus_member;": (KERNEL, [(14, "bogus_member")], "a member written nowhere in the file or headers"),
    "acc += helper_from_header(in[i]);": (KERNEL, [(7, "helper_from_header")], "not in the file: a local header's"),
    "acc += in[i]; // uses undefined_thing": (KERNEL, [], "a comment's words are not names"),
    'printf("%d missing_word\\n", tid);': (KERNEL, [], "a string's words are not names"),
    "auto f = [&](int u) { return u + acc; };": (KERNEL, [], "a lambda's parameter is declared by the fill"),
    "const int lane = tid % warpSize, warp = tid / warpSize;": (KERNEL, [], "two declarators"),
    "float y2 = static_cast<float>(n) * __expf(acc);": (KERNEL, [], "a cast and an intrinsic"),
    "float v = __ldg(&in[i]);": (KERNEL, [], "a read-only load of a parameter, declaring a new local"),
    "float4 q = vec[i];\n    acc += q.x + q.y * q.w;": (KERNEL, [], "a float4 and its members"),
    "__shared__ typename cub::BlockReduce<float, 256>::TempStorage temp;\n"
    "    acc = cub::BlockReduce<float, 256>(temp).Sum(acc);": (KERNEL, [], "cub's block reduction (the file has cub)"),
    "acc += sq(in[i]) * BLOCK;": (KERNEL, [], "a __device__ function and a macro of the file"),
}


@pytest.mark.parametrize("fill", list(UNKNOWN))
def test_unknown_names(fill: str) -> None:
    document, expected, why = UNKNOWN[fill]
    checks = context(document)
    assert checks.unknown_names(fill) == expected, why
    assert [fault.name for fault in checks.faults_of([RULE], fill)] == [name for _, name in expected], why


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


def test_names_from_local_headers() -> None:
    header = "#pragma once\n__device__ float helper_from_header(float v) { return v; }\n"
    fill = "acc += helper_from_header(in[i]);"
    assert context(KERNEL, local_headers=(header,)).unknown_names(fill) == []


def test_offsets_are_string_indices_past_non_ascii_text() -> None:
    """The document has a non-ASCII comment before the region and the fill has one before the bad name."""
    checks = context(KERNEL.replace("// the square of x", "// le carré de x, ½"))
    assert checks.unknown_names("/* é */ int j = threadIdxx.x;") == [(16, "threadIdxx")]


def test_a_name_declared_only_in_the_replaced_region_is_unknown() -> None:
    text = KERNEL.replace("‸", "float acc2 = = ;")
    start = text.index("float acc2")
    checks = CheckContext(text, start, start + len("float acc2 = = ;"), fallback_names())
    assert checks.unknown_names("acc2 += 1.0f;") == [(0, "acc2")]


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
    assert (at_blank(text).unknown_names("_storage.x = 0;") == []) is ok


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
    found = [name for _, name in at_blank(text, HeaderIndex.from_lines(["::cub", "cub"])).unknown_names(fill)]
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
    found = at_blank(text, HeaderIndex.from_lines(["max", "min", "push_back"])).unknown_names(fill)
    assert [name for _, name in found] == unknown


@pytest.mark.parametrize(("fill", "unknown"), [
    ("or = 0;", ["_storageor"]),  # glued onto the typed word: the whole identifier is judged
    ("_t = true;", ["_storage_t"]),
    (".y ^= 1;", []),
])
def test_a_fill_that_glues_onto_the_typed_word_is_judged_as_the_whole_identifier(fill: str,
                                                                                 unknown: list[str]) -> None:
    text = "__global__ void k(int* out) {\n    int2 _storage = make_int2(0, 0);\n    _storage‸\n    out[0] = 0;\n}\n"
    at = text.index("‸")
    checks = CheckContext(text.replace("‸", ""), at, at)
    assert [name for _, name in checks.unknown_names(fill)] == unknown
