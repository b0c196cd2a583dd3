#include <cuda_runtime.h>

__global__ void matMul(const float *A, const float *B, float *C, int N)
{
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < N && col < N) {  // @hole
        float sum = 0.0f;
        for (int k = 0; k < N; ++k)
            sum += A[row * N + k] * B[k * N + col];  // @hole midline=sum +=
        C[row * N + col] = sum;  // @hole midline=C[
    }
}
