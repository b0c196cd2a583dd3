#include <cuda_runtime.h>

__global__ void matrixAdd(const float *A, const float *B, float *C, int width, int height)
{
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;  // @hole midline=int row =
    if (row < height && col < width) {  // @hole
        int idx = row * width + col;
        C[idx] = A[idx] + B[idx];
    }
}
