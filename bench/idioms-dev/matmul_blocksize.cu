#include <cuda_runtime.h>

#define BLOCK_SIZE 32

__global__ void sgemm_tiled(const float *A, const float *B, float *C, int M, int N, int K)
{
    __shared__ float As[BLOCK_SIZE][BLOCK_SIZE];
    __shared__ float Bs[BLOCK_SIZE][BLOCK_SIZE];
    int row = blockIdx.y * BLOCK_SIZE + threadIdx.y;
    int col = blockIdx.x * BLOCK_SIZE + threadIdx.x;
    float acc = 0.0f;
    for (int t = 0; t < (K + BLOCK_SIZE - 1) / BLOCK_SIZE; ++t) {  // @hole
        int aCol = t * BLOCK_SIZE + threadIdx.x;
        int bRow = t * BLOCK_SIZE + threadIdx.y;
        As[threadIdx.y][threadIdx.x] = (row < M && aCol < K) ? A[row * K + aCol] : 0.0f;
        Bs[threadIdx.y][threadIdx.x] = (bRow < K && col < N) ? B[bRow * N + col] : 0.0f;  // @hole midline=Bs[threadIdx.y][threadIdx.x] =
        __syncthreads();
        for (int e = 0; e < BLOCK_SIZE; ++e)
            acc += As[threadIdx.y][e] * Bs[e][threadIdx.x];
        __syncthreads();
    }
    if (row < M && col < N)  // @hole
        C[row * N + col] = acc;
}
