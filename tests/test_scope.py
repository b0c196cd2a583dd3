"""The names of the function around a hole (`dice_lsp.completion.scope`) and how bank values are completed with
them: golden cases of kernels as users write them."""

from __future__ import annotations

from dice_lsp.completion.checks.context import CheckContext
from dice_lsp.completion.scope import FunctionScope, Name, bind

VECTOR_ADD = """#include <cuda_runtime.h>

__global__ void vectorAdd(const float *a, const float *b, float *c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        HOLE
    }
}

void launch(const float *a, const float *b, float *c, int n)
{
    vectorAdd<<<(n + 255) / 256, 256>>>(a, b, c, n);
}
"""


def scope_at(text: str, typed: str = "") -> FunctionScope:
    at = text.index("HOLE")
    return FunctionScope(text[:at] + typed, text[at + len("HOLE"):])


def test_parameters_and_locals_with_their_uses_the_holes_line_left_out() -> None:
    scope = scope_at(VECTOR_ADD)
    assert scope.is_kernel
    assert dict(scope.names) == {
        "a": Name("a", type="float", pointer=True, constant=True, parameter=True, uses=0),
        "b": Name("b", type="float", pointer=True, constant=True, parameter=True, uses=0),
        "c": Name("c", type="float", pointer=True, constant=False, parameter=True, uses=0),
        "n": Name("n", type="int", pointer=False, constant=False, parameter=True, uses=1),
        # its declaration not counted
        "i": Name("i", type="int", pointer=False, constant=False, parameter=False, uses=1),
    }
    assert scope.unused == {"a", "b", "c"}
    assert scope.unused_in("c[i] = a[i] + b[i];") == 3
    assert scope.unused_in("c[i] = 0.0f; // a b") == 1  # a comment's words are not uses


def test_multi_line_signatures_templates_and_arrays() -> None:
    text = ("template <typename T>\n__device__ void f(const T* __restrict__ in,\n"
            "                  T out[], unsigned int count = 4)\n{\n    __shared__ float tile[32];\n"
            "    HOLE\n    out[0] = in[0] + tile[0];\n}\n")
    scope = scope_at(text)
    assert not scope.is_kernel
    assert {n.name: (n.pointer, n.constant, n.uses) for n in scope.names.values()} == {
        "in": (True, True, 1), "out": (True, False, 1), "count": (False, False, 0), "tile": (True, False, 1)}


def test_no_function_around_the_hole_has_no_names() -> None:
    scope = FunctionScope("#include <cuda_runtime.h>\n", "\nint x;\n")
    assert scope.names == {} and not scope.is_kernel and scope.unused == frozenset()


def test_bind_writes_the_pointer_that_is_not_const_and_reads_the_others_in_order() -> None:
    scope = scope_at(VECTOR_ADD)
    found = bind("$1[$0] = $2[$0] + $3[$0];", ["i"], scope)
    assert found is not None and found.names == ["i", "c", "a", "b"]
    assert (found.bound, found.alternatives) == (3, 1)  # the two reads could swap


def test_bind_prefers_unused_scalars_and_counts_the_other_choices() -> None:
    text = ("__global__ void k(float* y, int rows, int cols)\n{\n    int r = blockIdx.y;\n    HOLE\n"
            "    y[r] = cols;\n}\n")
    found = bind("if ($0 < $1) {", ["r", None], scope_at(text))
    assert found is not None and found.names == ["r", "rows"] and found.alternatives == 0
    everyone = bind("if ($0 < $1) {", ["y", None], scope_at(text.replace("y[r] = cols;", "y[r] = rows + cols;")))
    assert everyone is not None and everyone.names == ["y", "rows"] and everyone.alternatives == 2  # rows, cols, r


def test_bind_leaves_declarations_members_and_calls_alone() -> None:
    scope = scope_at(VECTOR_ADD)
    assert bind("int $1 = $0 * 2;", ["i"], scope) is None  # a new name is not one of the scope's
    assert bind("$0 = $1.x;", ["i"], scope) is not None  # `$1` before `.x` is a scalar here: n
    assert bind("$0 = $1->$2;", ["i"], scope) is None  # a member has no name in scope
    assert bind("$1($0);", ["i"], scope) is None  # a function
    assert bind("if ($0 < n) {", ["i"], scope) is None  # nothing free to bind
    assert bind("$1 = $2 + $3 + $4 + $5;", ["i"], scope) is None  # more than three free


def test_bind_fails_when_no_name_fits() -> None:
    text = "__global__ void k(const float* x)\n{\n    HOLE\n}\n"
    assert bind("$1[$0] = 0;", ["i"], scope_at(text)) is None  # no pointer it may write
    found = bind("sum += $1[$0];", ["i"], scope_at(text))
    assert found is not None and found.names == ["i", "x"]


def test_every_variable_of_a_declaration_is_a_name() -> None:
    text = ("void run(int n)\n{\n    float *d_a, *d_b;\n    cudaEvent_t start, stop;\n    cudaEventCreate(&start);\n"
            "    HOLE\n    cudaEventRecord(start);\n    cudaMalloc(&d_a, n);\n}\n")
    scope = scope_at(text)
    assert {n.name: (n.pointer, n.uses) for n in scope.names.values()} == {
        "n": (False, 1), "d_a": (True, 1), "d_b": (True, 0), "start": (False, 2), "stop": (False, 0)}
    assert scope.unused == {"d_b", "stop"}


# what the function's text alone did not tell: the checks' tree finds the function and its blocks


def test_a_method_in_a_class_has_its_own_parameters_not_the_classs_members() -> None:
    text = ("struct Reducer {\n    float* out;\n    __device__ void add(const float* in, int n) {\n"
            "        int t = threadIdx.x;\n        HOLE\n    }\n};\n")
    scope = scope_at(text)
    assert not scope.is_kernel
    assert {n.name: (n.pointer, n.constant, n.parameter, n.uses) for n in scope.names.values()} == {
        "in": (True, True, True, 0), "n": (False, False, True, 0), "t": (False, False, False, 0)}


def test_an_indented_function_in_a_namespace() -> None:
    text = ("namespace ops {\n  __global__ void scale(float* y, const float* x, float a, int n)\n  {\n"
            "      int i = blockIdx.x * blockDim.x + threadIdx.x;\n      HOLE\n"
            "      if (i < n) y[i] = a * x[i];\n  }\n}\n")
    scope = scope_at(text)
    assert scope.is_kernel
    assert list(scope.names) == ["y", "x", "a", "n", "i"]
    assert scope.unused == frozenset()


def test_a_local_of_a_block_closed_above_is_not_in_scope() -> None:
    text = ("__global__ void k(float* y, int n)\n{\n    if (n > 4) {\n        int big = n / 4;\n        y[0] = big;\n"
            "    } else {\n        int small = n;\n        y[0] = small;\n    }\n    for (int j = 0; j < n; ++j) {\n"
            "        float acc = 0;\n        y[j] = acc;\n    }\n    HOLE\n}\n")
    assert list(scope_at(text).names) == ["y", "n"]  # not big, small, j nor acc
    inside = text.replace("        y[j] = acc;\n", "        HOLE\n").replace("    HOLE\n}", "}")
    assert {n.name: n.uses for n in scope_at(inside).names.values()} == {"y": 2, "n": 4, "j": 2, "acc": 0}


def test_a_signature_over_several_lines_with_a_template_and_attributes() -> None:
    text = ("template <typename T,\n          int BLOCK>\n__global__ void\n__launch_bounds__(BLOCK)\n"
            "reduce(const T* __restrict__ in,\n       T* __restrict__ out,\n       int n)\n{\n"
            "    __shared__ T tile[BLOCK];\n    HOLE\n    out[0] = tile[0];\n}\n")
    scope = scope_at(text)
    assert scope.is_kernel  # `__global__` two lines above the line the name is on
    assert {n.name: (n.pointer, n.constant, n.uses) for n in scope.names.values()} == {
        "in": (True, True, 0), "out": (True, False, 1), "n": (False, False, 0), "tile": (True, False, 1)}


def test_const_of_the_pointee_not_of_the_pointer() -> None:
    text = "__global__ void k(float const* a, float* const b, const int* const c)\n{\n    HOLE\n}\n"
    assert {n.name: n.constant for n in scope_at(text).names.values()} == {"a": True, "b": False, "c": True}


def test_a_half_typed_line_neither_hides_the_function_nor_counts_as_uses() -> None:
    text = "__global__ void k(const float* a, float* b, int n)\n{\n    int i = threadIdx.x;\n    HOLE\n}\n"
    scope = scope_at(text, "for (int j = 0; j < n; ")
    assert list(scope.names) == ["a", "b", "n", "i"] and scope.unused == {"a", "b", "n", "i"}


def test_the_checks_request_is_reused_when_it_is_this_holes() -> None:
    at = VECTOR_ADD.index("HOLE")
    before, after = VECTOR_ADD[:at], VECTOR_ADD[at + len("HOLE"):]
    checks = CheckContext(before + after, len(before), len(before)).request
    scope = FunctionScope(before, after, checks)
    assert scope.names == scope_at(VECTOR_ADD).names
    assert scope._request is checks
    other = FunctionScope(before + "x", after, checks)  # another hole's request is not read
    assert other._request is not checks and "x" not in other.names


def test_uses_below_a_block_the_hole_opened_still_count() -> None:
    text = ("__global__ void k(const float* x, float* y, int n, float* out)\n{\n"
            "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    HOLE\n        y[i] = x[i];\n    }\n"
            "    out[0] = y[0];\n}\n\n__global__ void other(float* out)\n{\n    out[1] = 0;\n}\n")
    scope = scope_at(text)  # the hole held `if (i < n) {`: tree-sitter ends the kernel at the `}` below it
    assert {n.name: n.uses for n in scope.names.values()} == {"x": 1, "y": 2, "n": 0, "out": 1, "i": 2}
    assert scope.unused == {"n"}


def test_a_name_carries_its_declared_type_and_whether_it_is_shared_memory() -> None:
    text = """__global__ void k(const float *in, unsigned int n, size_t len)
{
    __shared__ float tile[32][33];
    extern __shared__ int counts[];
    const int lane = threadIdx.x % 32;
    HOLE
}
"""
    names = scope_at(text).names
    assert {name: (found.type, found.shared) for name, found in names.items()} == {
        "in": ("float", False), "n": ("unsigned int", False), "len": ("size_t", False),
        "tile": ("float", True), "counts": ("int", True), "lane": ("int", False)}
