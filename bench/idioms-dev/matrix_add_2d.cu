#include <cuda_runtime.h>

__global__ void matAdd(const float *A, const float *B, float *C, int rows, int cols)
{
    int row = blockIdx.y * blockDim.y + threadIdx.y;  // @hole
    int col = blockIdx.x * blockDim.x + threadIdx.x;  // @hole midline=int col =
    if (row < rows && col < cols) {  // @hole
        int idx = row * cols + col;
        C[idx] = A[idx] + B[idx];
    }
}
