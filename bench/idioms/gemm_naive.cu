#include <cuda_runtime.h>

__global__ void gemm(const float *A, const float *B, float *C, int M, int N, int K)
{
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M || col >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < K; k++) {
        acc += A[row * K + k] * B[k * N + col];  // @hole midline=acc +=
    }
    C[row * N + col] = acc;
}

void launchGemm(const float *A, const float *B, float *C, int M, int N, int K)
{
    dim3 threads(16, 16);
    dim3 blocks((N + 15) / 16, (M + 15) / 16);
    gemm<<<blocks, threads>>>(A, B, C, M, N, K);  // @hole midline=gemm<<<
}
