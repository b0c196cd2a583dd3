// Transpose: out[c][r] = in[r][c]; in is rows x cols, out is cols x rows, both row-major float32.
// The original: straight from global to global; a 32x8 block covers a 32x32 tile, each thread 4 elements.
// The reads are coalesced, the writes are not (a warp writes 32 different rows of out).
#include <cuda_runtime.h>

/* dice:launch
kernel = "transpose"
sizes = { rows = 8192, cols = 4096 }
grid = ["cdiv(cols, 32)", "cdiv(rows, 32)"]
block = [32, 8]
args = [
  { name = "out", role = "out", dtype = "float32", shape = ["cols", "rows"] },
  { name = "in", role = "in", dtype = "float32", shape = ["rows", "cols"] },
  { name = "rows", role = "scalar", dtype = "int32", value = "rows" },
  { name = "cols", role = "scalar", dtype = "int32", value = "cols" },
]
*/
__global__ void transpose(float* out, const float* in, int rows, int cols) {
    int c = blockIdx.x * 32 + threadIdx.x;
    for (int j = 0; j < 32; j += 8) {
        int r = blockIdx.y * 32 + threadIdx.y + j;
        if (r < rows && c < cols) out[(size_t)c * rows + r] = in[(size_t)r * cols + c];
    }
}
