#include <cuda_runtime.h>

__global__ void matMulNaive(const float *A, const float *B, float *C, int N)
{
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < N && col < N) {
        float sum = 0.0f;
        for (int k = 0; k < N; ++k) {  // @hole midline=for (
            sum += A[row * N + k] * B[k * N + col];  // @hole
        }
        C[row * N + col] = sum;
    }
}
