"""The lines a kernel's structure implies (`dice_lsp.completion.sources.rules`): golden cases of kernels as users
write them, each with the hole at `HOLE` (what is typed before it stays on the line)."""

from __future__ import annotations

import pytest

from dice_lsp.completion.checks.context import CheckContext
from dice_lsp.completion.sources import rules


def proposed(text: str) -> dict[str, str]:
    """What the rules propose at `HOLE`, by rule; the names the code below needs come from the checks, as in the
    product."""
    at = text.index("HOLE")
    document = text.replace("HOLE", "")
    checker = CheckContext(document, at, at)
    return {c.rule: c.text for c in rules.candidates(document[:at], document[at:], checker.needed, checker.request)}


ELEMENTWISE = """__global__ void scaleKernel(float *out, const float *in, float s, int n)
{
    HOLE
    if (idx < n) {
        out[idx] = s * in[idx];
    }
}
"""


def test_the_first_line_of_a_kernel_declares_the_index_the_code_below_uses() -> None:
    assert proposed(ELEMENTWISE) == {"thread_index": "int idx = blockIdx.x * blockDim.x + threadIdx.x;"}


def test_a_half_typed_index_is_completed_along_the_axis_its_name_says() -> None:
    text = """__global__ void addMatrices(const float *a, const float *b, float *c, int rows, int cols)
{
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = HOLE
    if (row < rows && col < cols) c[row * cols + col] = a[row * cols + col] + b[row * cols + col];
}
"""
    assert proposed(text) == {"thread_index": "blockIdx.y * blockDim.y + threadIdx.y;"}


def test_the_index_is_written_the_way_the_file_writes_one() -> None:
    text = """__global__ void first(float *x, int n)
{
    int i = threadIdx.x + blockIdx.x * blockDim.x;
    if (i < n) x[i] = 0.0f;
}

__global__ void second(float *y, int n)
{
    HOLE
    if (k2 < n) y[k2] = 1.0f;
}
""".replace("k2", "gid")
    assert proposed(text)["thread_index"] == "int gid = threadIdx.x + blockIdx.x * blockDim.x;"


@pytest.mark.parametrize(("name", "value"), [
    ("stride", "blockDim.x * gridDim.x"),
    ("lane", "threadIdx.x % warpSize"),
    ("warpId", "threadIdx.x / warpSize"),
])
def test_the_grid_stride_and_warp_coordinates_are_named_indices(name: str, value: str) -> None:
    text = f"""__global__ void k(float *out, const float *in, int n)
{{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    HOLE
    out[i] = in[i] + {name} * (float)warpSize;
}}
"""
    assert proposed(text)["thread_index"] == f"int {name} = {value};"


def test_an_index_of_a_shared_array_is_the_threads_place_in_its_block() -> None:
    text = """__global__ void blockSum(const float *in, float *out)
{
    __shared__ float buf[256];
    HOLE
    buf[tid] = in[blockIdx.x * blockDim.x + tid];
}
"""
    assert proposed(text)["thread_index"] == "int tid = threadIdx.x;"


def test_no_index_is_proposed_for_a_name_that_says_no_axis_or_an_axis_already_indexed() -> None:
    text = """__global__ void k(float *v, int nx, int ny)
{
    int ix = blockIdx.x * blockDim.x + threadIdx.x;
    int iy = blockIdx.y * blockDim.y + threadIdx.y;
    HOLE
    v[idx] = v[offset] * 2.0f;
}
"""
    assert "thread_index" not in proposed(text)  # two needed names; idx would be a second index along x


def test_a_loop_header_over_a_body_is_a_grid_stride_loop() -> None:
    text = """__global__ void clampAll(float *x, float lo, float hi, int n)
{
    HOLE
        x[i] = fminf(fmaxf(x[i], lo), hi);
    }
}
"""
    assert proposed(text) == {
        "grid_stride": "for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {"}


@pytest.mark.parametrize(("below", "guard"), [
    ("    if_block", "if (i < n) {"),
    ("        y[i] += a * x[i];\n", "if (i < n)"),
    ("    y[i] += a * x[i];\n", "if (i >= n) return;"),
    ("        return;\n    y[i] += a * x[i];\n", "if (i >= n)"),
])
def test_the_bounds_test_after_the_index_takes_the_shape_the_code_below_has(below: str, guard: str) -> None:
    below = below.replace("    if_block", "        y[i] += a * x[i];\n    }\n")
    text = f"""__global__ void saxpy(float a, const float *x, float *y, int n)
{{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    HOLE
{below}}}
"""
    assert proposed(text) == {"bounds_guard": guard}


def test_a_two_dimensional_guard_tests_each_index_against_its_axis_count() -> None:
    text = """__global__ void blur(const unsigned char *in, unsigned char *out, int width, int height)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    HOLE
    out[y * width + x] = in[y * width + x] / 2;
}
"""
    assert proposed(text) == {"bounds_guard": "if (x >= width || y >= height) return;"}
    x_line, y_line = ("    int x = blockIdx.x * blockDim.x + threadIdx.x;\n",
                      "    int y = blockIdx.y * blockDim.y + threadIdx.y;\n")
    rows_first = text.replace(x_line + y_line, y_line + x_line)  # x's index first all the same
    assert rows_first != text and proposed(rows_first) == {"bounds_guard": "if (x >= width || y >= height) return;"}


def test_no_guard_where_the_count_is_ambiguous_or_the_code_below_tests_already() -> None:
    ambiguous = """__global__ void k(float *v, int rows, int cols)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    HOLE
    v[i] = 0.0f;
}
"""
    guarded = ELEMENTWISE.replace("    HOLE\n", "    int idx = blockIdx.x * blockDim.x + threadIdx.x;\n    HOLE\n")
    assert proposed(ambiguous) == {}  # i may run over the rows, the columns or both
    assert proposed(guarded) == {}
    assert proposed(ambiguous.replace("int rows, int cols", "int n, int m")) == {"bounds_guard": "if (i >= n) return;"}


def test_a_barrier_follows_a_write_to_shared_memory_that_other_threads_read() -> None:
    text = """__global__ void reverse(int *d, int n)
{
    __shared__ int s[64];
    int t = threadIdx.x;
    s[t] = d[t];
    HOLE
    d[t] = s[n - t - 1];
}
"""
    assert proposed(text) == {"barrier": "__syncthreads();"}


def test_no_barrier_between_two_stores_of_one_load_phase_or_after_a_loop_that_ends_with_one() -> None:
    loads = """__global__ void tiles(const float *a, const float *b, float *c)
{
    __shared__ float As[16][16];
    __shared__ float Bs[16][16];
    As[threadIdx.y][threadIdx.x] = a[threadIdx.y * 16 + threadIdx.x];
    HOLE
    Bs[threadIdx.y][threadIdx.x] = b[threadIdx.y * 16 + threadIdx.x];
}
"""
    loop = """__global__ void reduce(float *out)
{
    __shared__ float s[256];
    unsigned int tid = threadIdx.x;
    for (unsigned int k = blockDim.x / 2; k > 0; k >>= 1) {
        if (tid < k) s[tid] += s[tid + k];
        __syncthreads();
    }
    HOLE
    if (tid == 0) out[blockIdx.x] = s[0];
}
"""
    assert "barrier" not in proposed(loads)
    assert "barrier" not in proposed(loop)


@pytest.mark.parametrize(("typed", "expected"), [
    ("int numBlocks = ", "(count + threadsPerBlock - 1) / threadsPerBlock;"),
    ("dim3 grid(", "(width + block.x - 1) / block.x, (height + block.y - 1) / block.y);"),
])
def test_a_launch_size_is_the_ceiling_of_the_data_over_the_block(typed: str, expected: str) -> None:
    text = f"""void launch(float *d, int count, int width, int height)
{{
    int threadsPerBlock = 256;
    dim3 block(16, 16);
    {typed}HOLE
}}
"""
    assert proposed(text) == {"launch_size": expected}


def test_a_hole_with_code_after_the_cursor_gets_nothing() -> None:
    at = ELEMENTWISE.index("HOLE")
    document = ELEMENTWISE.replace("HOLE", "x = 1;")
    assert rules.candidates(document[:at], document[at:]) == []


WARP_SUM = """__device__ float warpSum(float partial)
{
    LOOP
        BODY
    return partial;
}
"""


def test_a_halving_loop_over_a_warp_exchanges_the_value_the_function_returns() -> None:
    body = WARP_SUM.replace("LOOP", "for (int delta = 16; delta > 0; delta /= 2)").replace("BODY", "HOLE")
    header = WARP_SUM.replace("LOOP", "HOLE").replace(
        "BODY", "partial += __shfl_down_sync(0xffffffff, partial, delta);")
    assert proposed(body) == {"warp_shuffle": "partial += __shfl_down_sync(0xffffffff, partial, delta);"}
    assert proposed(header) == {"halving_loop": "for (int delta = 16; delta > 0; delta /= 2)"}


def test_a_warp_maximum_to_every_lane_takes_fmaxf_the_xor_exchange_and_the_files_mask() -> None:
    text = """#define FULL_MASK 0xffffffff

__device__ float warpAllReduceMax(float best)
{
    for (int d = 16; d > 0; d >>= 1)
        best = fmaxf(best, HOLE
    return best;
}
"""
    assert proposed(text) == {"warp_shuffle": "__shfl_xor_sync(FULL_MASK, best, d));"}


@pytest.mark.parametrize(("pairing", "header"), [
    ("if (t < h) buf[t] += buf[t + h];", "for (unsigned int h = blockDim.x / 2; h > 0; h >>= 1) {"),
    ("if (t % (2 * h) == 0) buf[t] += buf[t + h];", "for (unsigned int h = 1; h < blockDim.x; h *= 2) {"),
])
def test_a_shared_memory_tree_halves_or_doubles_its_distance_as_its_pairs_say(pairing: str, header: str) -> None:
    text = f"""__global__ void blockSum(const float *in, float *out)
{{
    __shared__ float buf[256];
    unsigned int t = threadIdx.x;
    buf[t] = in[blockIdx.x * blockDim.x + t];
    __syncthreads();
    HOLE
        {pairing}
        __syncthreads();
    }}
    if (t == 0) out[blockIdx.x] = buf[0];
}}
"""
    assert proposed(text) == {"halving_loop": header}


def test_a_grid_stride_while_loop_ends_by_stepping_its_index() -> None:
    text = """__global__ void square(float *v, int n)
{
    int k = blockIdx.x * blockDim.x + threadIdx.x;
    int stride = blockDim.x * gridDim.x;
    while (k < n) {
        v[k] = v[k] * v[k];
        HOLE
    }
}
"""
    assert proposed(text) == {"stride_step": "k += stride;"}
    stepped = text.replace("v[k] = v[k] * v[k];", "v[k] = v[k] * v[k];\n        k += stride;")
    assert "stride_step" not in proposed(stepped)


def test_a_host_functions_tail_releases_what_it_made_in_order() -> None:
    text = """void run(const float *h_x, float *h_y, int n)
{
    float *d_x, *d_y;
    cudaEvent_t done;
    cudaMalloc(&d_x, n * sizeof(float));
    cudaMalloc((void **)&d_y, n * sizeof(float));
    cudaEventCreate(&done);
    cudaMemcpy(d_x, h_x, n * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemcpy(h_y, d_y, n * sizeof(float), cudaMemcpyDeviceToHost);
    cudaFree(d_x);
    HOLE
}
"""
    assert proposed(text) == {"release": "cudaFree(d_y);"}
    freed_below = text.replace("    HOLE\n", "    HOLE\n    cudaFree(d_y);\n")
    assert proposed(freed_below) == {"release": "cudaEventDestroy(done);"}
    assert proposed(text.replace("    HOLE\n", "    HOLE\n    printf(\"%f\\n\", h_y[0]);\n")) == {}


def test_a_row_is_tested_against_the_rows_whichever_grid_axis_it_takes() -> None:
    text = """__global__ void rowScale(float *m, const float *s, int rows, int cols)
{
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    HOLE
    for (int c = 0; c < cols; ++c) m[row * cols + c] *= s[row];
}
"""
    assert proposed(text) == {"bounds_guard": "if (row >= rows) return;"}


def test_a_two_dimensional_blocks_flat_thread_index_counts_its_rows_of_threads() -> None:
    text = """__global__ void tileSum(const float *in, float *out)
{
    __shared__ float part[256];
    HOLE
    part[tid] = in[(blockIdx.x * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x];
}
"""
    assert proposed(text) == {"thread_index": "int tid = threadIdx.y * blockDim.x + threadIdx.x;"}


def test_a_line_that_starts_with_a_dereference_is_code_below_the_hole() -> None:
    text = """__global__ void offsets(const int *colSum, int *out, int n)
{
    HOLE
        *(out + blockIdx.x * n + i) = -colSum[i];
    }
}
"""
    assert "thread_index" not in proposed(text)  # the hole opens the loop the dereference is the body of


def test_a_kernel_that_gives_each_block_a_row_strides_over_the_row_by_the_blocks_threads() -> None:
    text = """__global__ void rowOffsets(const float *colSum, float *out, float k, int n)
{
    HOLE
        out[blockIdx.x * n + i] = k - colSum[i];
    }
}
"""
    assert proposed(text) == {"grid_stride": "for (int i = threadIdx.x; i < n; i += blockDim.x) {"}


def test_a_row_of_a_one_dimensional_kernel_runs_along_the_grids_only_axis() -> None:
    text = """__global__ void rowNorms(const float *m, float *norms, int rows, int cols)
{
    int row = HOLE
    if (row >= rows) return;
    float s = 0.0f;
    for (int c = 0; c < cols; ++c) s += m[row * cols + c] * m[row * cols + c];
    norms[row] = sqrtf(s);
}
"""
    assert proposed(text) == {"thread_index": "blockIdx.x * blockDim.x + threadIdx.x;"}


def test_a_thread_index_starts_a_kernel_however_long_its_signature() -> None:
    text = """namespace ops {
    __global__ void positions(const int *lengths, long *ids,
                              const int seqlen, const int batch)
    {
        HOLE
        int b = tid / seqlen;
        if (b < batch) ids[tid] = tid % seqlen < lengths[b] ? tid % seqlen : 1;
    }
}
"""
    assert proposed(text) == {"thread_index": "int tid = blockIdx.x * blockDim.x + threadIdx.x;"}


def test_no_thread_index_below_a_kernels_first_statements() -> None:
    text = """__global__ void gather(const float *in, float *out, const int *offsets, int n)
{
    for (int k = 0; k < n; ++k) {
        int offset = offsets[k];
        HOLE
        out[idx] = in[idx];
    }
}
"""
    assert "thread_index" not in proposed(text)  # `idx` is `offset + k` here, not the thread's index


def test_after_a_shared_memory_tree_the_first_thread_writes_the_blocks_result() -> None:
    text = """__global__ void blockMax(const float *in, float *blockMaxes)
{
    __shared__ float best[256];
    unsigned int t = threadIdx.x;
    best[t] = in[blockIdx.x * blockDim.x + t];
    __syncthreads();
    for (unsigned int half = blockDim.x / 2; half > 0; half >>= 1) {
        if (t < half) best[t] = fmaxf(best[t], best[t + half]);
        __syncthreads();
    }
    HOLE
}
"""
    assert proposed(text) == {"block_result": "if (t == 0) blockMaxes[blockIdx.x] = best[0];"}
    assert proposed(text.replace("    HOLE\n", "    HOLE\n    blockMaxes[blockIdx.x] = best[0];\n")) == {}


HOST = """void addOnDevice(const float *h_a, const float *h_b, float *h_out, int n)
{
    size_t bytes = n * sizeof(float);
    float *d_a, *d_b, *d_out;
    cudaMalloc((void **)&d_a, bytes);
    HOLE
}
"""


def test_the_next_buffer_declared_with_an_allocated_one_is_allocated_the_same_way() -> None:
    assert proposed(HOST) == {"next_creation": "cudaMalloc((void **)&d_b, bytes);"}
    later = HOST.replace("    HOLE\n", "    HOLE\n    cudaMalloc((void **)&d_b, bytes);\n")
    assert proposed(later) == {"next_creation": "cudaMalloc((void **)&d_out, bytes);"}
    events = "void t()\n{\n    cudaEvent_t start, stop;\n    cudaEventCreate(&start);\n    HOLE\n}\n"
    assert proposed(events) == {"next_creation": "cudaEventCreate(&stop);"}


@pytest.mark.parametrize(("typed", "rest"), [
    ("cudaMemcpy(d_b, ", "h_b, bytes, cudaMemcpyHostToDevice);"),
    ("cudaMemcpy(h_out, ", "d_out, bytes, cudaMemcpyDeviceToHost);"),
])
def test_a_half_typed_copy_takes_the_buffers_partner_and_its_allocated_size(typed: str, rest: str) -> None:
    text = HOST.replace("    HOLE\n", "    cudaMalloc((void **)&d_b, bytes);\n    cudaMalloc((void **)&d_out, bytes);\n"
                        f"    {typed}HOLE\n")
    assert proposed(text) == {"copy_pair": rest}


def test_the_files_own_way_of_computing_an_index_wins() -> None:
    text = """__global__ void first(const float *x, float *y, int rows)
{
    const int row = blockIdx.x;
    if (row < rows) y[row] = x[row];
}

__global__ void second(const float *x, float *y, int rows)
{
    HOLE
    if (row < rows) y[row] = 2.0f * x[row];
}
"""
    assert "thread_index" not in proposed(text)  # the document's line (`const int row = blockIdx.x;`) is proposed
    same = text.replace("const int row = blockIdx.x;", "int row = blockIdx.x * blockDim.x + threadIdx.x;")
    assert proposed(same)["thread_index"] == "int row = blockIdx.x * blockDim.x + threadIdx.x;"


def test_a_projects_own_thread_index_helper_wins_and_a_name_of_another_role_does_not_count() -> None:
    helper = """__device__ int gridThreadId(int dims) { return dims * (int)(blockIdx.x * blockDim.x + threadIdx.x); }

__global__ void first(float *y, int n)
{
    int thread_id = gridThreadId(1);
    if (thread_id < n) y[thread_id] = 0.0f;
}

__global__ void second(float *y, int n)
{
    HOLE
    if (thread_id < n) y[thread_id] = 1.0f;
}
"""
    assert "thread_index" not in proposed(helper)
    other_role = helper.replace("int thread_id = gridThreadId(1);", "int thread_id = n - 1;")
    assert proposed(other_role)["thread_index"] == "int thread_id = blockIdx.x * blockDim.x + threadIdx.x;"
