#include <cuda_runtime.h>

#define TILE_WIDTH 16

__global__ void matMulTiled(const float *M, const float *N, float *P, int width)
{
    __shared__ float Mds[TILE_WIDTH][TILE_WIDTH];
    __shared__ float Nds[TILE_WIDTH][TILE_WIDTH];

    int bx = blockIdx.x;
    int by = blockIdx.y;
    int tx = threadIdx.x;
    int ty = threadIdx.y;
    int row = by * TILE_WIDTH + ty;
    int col = bx * TILE_WIDTH + tx;

    float pValue = 0;
    for (int ph = 0; ph < width / TILE_WIDTH; ++ph) {
        Mds[ty][tx] = M[row * width + ph * TILE_WIDTH + tx];  // @hole
        Nds[ty][tx] = N[(ph * TILE_WIDTH + ty) * width + col];
        __syncthreads();
        for (int k = 0; k < TILE_WIDTH; ++k) {
            pValue += Mds[ty][k] * Nds[k][tx];  // @hole midline=pValue +=
        }
        __syncthreads();
    }
    P[row * width + col] = pValue;
}
