// Row sums: out[r] = x[r][0] + x[r][1] + ... + x[r][cols-1] for a rows x cols matrix (row-major).
// The original: one block per row, and thread 0 of the block adds the whole row alone, in order.
#include <cuda_runtime.h>

/* dice:launch
kernel = "row_sum"
sizes = { rows = 8192, cols = 4096 }
grid = ["rows"]
block = [256]
args = [
  { name = "out", role = "out", dtype = "float32", shape = ["rows"] },
  { name = "x", role = "in", dtype = "float32", shape = ["rows", "cols"] },
  { name = "rows", role = "scalar", dtype = "int32", value = "rows" },
  { name = "cols", role = "scalar", dtype = "int32", value = "cols" },
]
*/
__global__ void row_sum(float* out, const float* x, int rows, int cols) {
    int r = blockIdx.x;
    if (r >= rows || threadIdx.x != 0) return;
    const float* row = x + (size_t)r * cols;
    float s = 0.0f;
    for (int c = 0; c < cols; ++c) s += row[c];
    out[r] = s;
}
