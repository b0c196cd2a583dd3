#include <cuda_runtime.h>

__global__ void rowSum(const float *mat, float *sums, int rows, int cols)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < rows) {
        float acc = 0.0f;
        for (int c = 0; c < cols; c++) {  // @hole
            acc += mat[r * cols + c];
        }
        sums[r] = acc;
    }
}

__global__ void colMean(const float *mat, float *means, int rows, int cols)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= cols) return;
    float acc = 0.0f;
    for (int r = 0; r < rows; r++) acc += mat[r * cols + c];
    means[c] = acc / rows;  // @hole midline=means[c] =
}
