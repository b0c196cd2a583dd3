"""Documents the checks' golden cases are judged in, and the helpers that judge them: `‸` marks the region
(empty), the fill goes there."""

from __future__ import annotations

from dice_lsp.completion.checks.context import CheckContext
from dice_lsp.completion.checks.request import Request
from dice_lsp.completion.checks.rule import Rule
from dice_lsp.toolchain.header_index import NO_HEADERS, HeaderIndex, fallback_names

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

# an empty kernel: the constructs' cases are one statement in it
VOID_KERNEL = "__global__ void k(float* out, int n) {\n    ‸\n}\n"


# a kernel beside another, with a closed loop above the hole and a block below it
SCOPED = """#define SCALE 2
typedef float real;
__device__ float blend(float a, float b, float t = 0.5f);
__global__ void other(float* dst, int count) {
    int gid = threadIdx.x;
    dst[gid] = 0.f;
}
__global__ void k(real* out, int n) {
    for (int i = 0; i < n; ++i) {
        float done = out[i];
    }
    int tid = threadIdx.x;
    ‸
    if (tid < n) {
        float bias = 1.f;
        out[tid] = bias + later;
    }
    float later = 2.f;
}
"""


def scoped() -> Request:
    """The request at the hole of `SCOPED`, with `printf` for the headers."""
    at = SCOPED.index("‸")
    return Request(SCOPED.replace("‸", ""), at, at, HeaderIndex.from_lines(["printf"]))


def context(case: str, headers: HeaderIndex | None = None, local_headers: tuple[str, ...] = ()) -> CheckContext:
    """The checks of `case` (a document with `‸` at the region), with the shipped header index by default."""
    cursor = case.index("‸")
    return CheckContext(case.replace("‸", ""), cursor, cursor, headers or fallback_names(), local_headers)


def at_blank(text: str, headers: HeaderIndex = NO_HEADERS) -> CheckContext:
    """The checks of `text` at its first blank line (indented four spaces), with `headers` (none by default)."""
    at = text.index("    \n") + 4
    return CheckContext(text, at, at, headers)


def judge_construct(rule: Rule, fill: str, ok: bool, case: str = VOID_KERNEL) -> None:
    """A construct rule's golden case: the rule rejects the fill exactly when it is not `ok`, the fill parses
    exactly when it is, and re-masking gets a span to denoise again when it does not."""
    checks = context(case)
    assert bool(checks.faults_of([rule], fill)) is not ok, fill
    assert checks.parses(fill) is ok, fill
    if not ok:
        assert checks.error_spans(fill), fill
