// Layer norm over each row of a rows x cols matrix: out[r][c] = (x[r][c] - mean_r) / sqrt(var_r + eps) * gamma[c]
// + beta[c], with the biased variance (divided by cols).
// The original: one block per row; thread 0 computes the mean and the variance alone (two passes), then the
// block writes the row.
#include <cuda_runtime.h>
#include <math.h>

/* dice:launch
kernel = "layernorm_rows"
sizes = { rows = 8192, cols = 2048 }
grid = ["rows"]
block = [256]
args = [
  { name = "out", role = "out", dtype = "float32", shape = ["rows", "cols"] },
  { name = "x", role = "in", dtype = "float32", shape = ["rows", "cols"] },
  { name = "gamma", role = "in", dtype = "float32", shape = ["cols"] },
  { name = "beta", role = "in", dtype = "float32", shape = ["cols"] },
  { name = "eps", role = "scalar", dtype = "float32", value = 1e-5 },
  { name = "rows", role = "scalar", dtype = "int32", value = "rows" },
  { name = "cols", role = "scalar", dtype = "int32", value = "cols" },
]
*/
__global__ void layernorm_rows(float* out, const float* x, const float* gamma, const float* beta, float eps,
                               int rows, int cols) {
    __shared__ float row_mean, row_rstd;
    int r = blockIdx.x;
    if (r >= rows) return;
    const float* in = x + (size_t)r * cols;
    float* o = out + (size_t)r * cols;
    if (threadIdx.x == 0) {
        float sum = 0.0f;
        for (int c = 0; c < cols; ++c) sum += in[c];
        float mean = sum / cols;
        float var = 0.0f;
        for (int c = 0; c < cols; ++c) {
            float d = in[c] - mean;
            var += d * d;
        }
        var /= cols;
        row_mean = mean;
        row_rstd = 1.0f / sqrtf(var + eps);
    }
    __syncthreads();
    for (int c = threadIdx.x; c < cols; c += blockDim.x) o[c] = (in[c] - row_mean) * row_rstd * gamma[c] + beta[c];
}
