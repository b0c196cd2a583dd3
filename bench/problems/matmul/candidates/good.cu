// good: shared-memory tiling: the block stages a 64x16 slice of A and a 16x64 slice of B per step (zero-filled
// past the edges), each thread keeps its 4x4 outputs in registers (same output mapping as the original).
#include <cuda_runtime.h>

#define TILE_M 64
#define TILE_N 64
#define TILE_K 16

__global__ void matmul(float* C, const float* A, const float* B, int M, int N, int K) {
    __shared__ float As[TILE_K][TILE_M + 4];  // As[k][m]: A's tile, transposed
    __shared__ float Bs[TILE_K][TILE_N + 4];  // Bs[k][n]
    const int tx = threadIdx.x, ty = threadIdx.y;  // block 16 x 16
    const int tid = ty * 16 + tx;
    const int row0 = blockIdx.y * TILE_M, col0 = blockIdx.x * TILE_N;
    float acc[4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = 0.0f;

    for (int k0 = 0; k0 < K; k0 += TILE_K) {
#pragma unroll
        for (int l = 0; l < 4; ++l) {  // 64 x 16 elements of A, 4 per thread, 16 consecutive k per row
            int idx = tid + l * 256;
            int m = idx >> 4, k = idx & 15;
            int gr = row0 + m, gk = k0 + k;
            As[k][m] = (gr < M && gk < K) ? __ldg(A + (size_t)gr * K + gk) : 0.0f;
        }
#pragma unroll
        for (int l = 0; l < 4; ++l) {  // 16 x 64 elements of B, 4 per thread, 64 consecutive columns per row
            int idx = tid + l * 256;
            int k = idx >> 6, n = idx & 63;
            int gk = k0 + k, gc = col0 + n;
            Bs[k][n] = (gk < K && gc < N) ? __ldg(B + (size_t)gk * N + gc) : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < TILE_K; ++k) {
            float a[4], b[4];
#pragma unroll
            for (int i = 0; i < 4; ++i) a[i] = As[k][ty + 16 * i];
#pragma unroll
            for (int j = 0; j < 4; ++j) b[j] = Bs[k][tx + 16 * j];
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        int row = row0 + ty + 16 * i;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            int col = col0 + tx + 16 * j;
            if (row < M && col < N) C[(size_t)row * N + col] = acc[i][j];
        }
    }
}
