#include <cuda_runtime.h>

__global__ void addBias(float *out, const float *bias, int rows, int cols)
{
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < rows && col < cols) {  // @hole midline=if (row < rows &&
        out[row * cols + col] += bias[col];  // @hole
    }
}
