// Row softmax: out[r][c] = exp(x[r][c] - max_r) / sum_c' exp(x[r][c'] - max_r) for a rows x cols matrix.
// The original: one block per row; thread 0 finds the max and the sum alone, then the block writes the row.
#include <cuda_runtime.h>
#include <math.h>

/* dice:launch
kernel = "softmax_rows"
sizes = { rows = 8192, cols = 2048 }
grid = ["rows"]
block = [256]
args = [
  { name = "out", role = "out", dtype = "float32", shape = ["rows", "cols"] },
  { name = "x", role = "in", dtype = "float32", shape = ["rows", "cols"] },
  { name = "rows", role = "scalar", dtype = "int32", value = "rows" },
  { name = "cols", role = "scalar", dtype = "int32", value = "cols" },
]
*/
__global__ void softmax_rows(float* out, const float* x, int rows, int cols) {
    __shared__ float row_max, row_sum;
    int r = blockIdx.x;
    if (r >= rows) return;
    const float* in = x + (size_t)r * cols;
    float* o = out + (size_t)r * cols;
    if (threadIdx.x == 0) {
        float m = -INFINITY;
        for (int c = 0; c < cols; ++c) m = fmaxf(m, in[c]);
        float s = 0.0f;
        for (int c = 0; c < cols; ++c) s += expf(in[c] - m);
        row_max = m;
        row_sum = s;
    }
    __syncthreads();
    for (int c = threadIdx.x; c < cols; c += blockDim.x) o[c] = expf(in[c] - row_max) / row_sum;
}
