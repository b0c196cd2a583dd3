// wrong: normalises and scales by gamma but never adds beta.
#include <cuda_runtime.h>
#include <math.h>

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
    for (int c = threadIdx.x; c < cols; c += blockDim.x) o[c] = (in[c] - row_mean) * row_rstd * gamma[c];
}
