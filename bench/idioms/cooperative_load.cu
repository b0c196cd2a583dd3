#include <cuda_runtime.h>

#define TILE_SIZE 1024

__global__ void smoothTiles(const float *in, float *out, int n)
{
    __shared__ float tile[TILE_SIZE];
    int base = blockIdx.x * TILE_SIZE;
    for (int i = threadIdx.x; i < TILE_SIZE; i += blockDim.x) {  // @hole midline=for (int i = threadIdx.x;
        tile[i] = (base + i < n) ? in[base + i] : 0.0f;  // @hole
    }
    __syncthreads();
    for (int i = threadIdx.x; i < TILE_SIZE; i += blockDim.x) {
        float left = (i > 0) ? tile[i - 1] : tile[i];
        float right = (i < TILE_SIZE - 1) ? tile[i + 1] : tile[i];
        if (base + i < n) out[base + i] = (left + tile[i] + right) / 3.0f;
    }
}
