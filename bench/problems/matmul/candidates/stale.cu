// stale: the early exit meant for blocks past the edge tests blockIdx.x < gridDim.x, which every block passes,
// so the kernel returns before computing or writing anything; C keeps whatever it held.
#include <cuda_runtime.h>

__global__ void matmul(float* C, const float* A, const float* B, int M, int N, int K) {
    if (blockIdx.x < gridDim.x) return;
    for (int i = 0; i < 4; ++i) {
        int row = blockIdx.y * 64 + threadIdx.y + 16 * i;
        for (int j = 0; j < 4; ++j) {
            int col = blockIdx.x * 64 + threadIdx.x + 16 * j;
            if (row < M && col < N) {
                float acc = 0.0f;
                for (int k = 0; k < K; ++k) acc += A[(size_t)row * K + k] * B[(size_t)k * N + col];
                C[(size_t)row * N + col] = acc;
            }
        }
    }
}
