// wrong: the tile is written back without being transposed inside (tile[ty][tx] instead of tile[tx][ty]), so
// the 32x32 blocks land in the right places but each one is the wrong way round.
#include <cuda_runtime.h>

__global__ void transpose(float* out, const float* in, int rows, int cols) {
    __shared__ float tile[32][33];
    int r0 = blockIdx.y * 32, c0 = blockIdx.x * 32;
    int c = c0 + threadIdx.x;
    for (int j = 0; j < 32; j += 8) {
        int r = r0 + threadIdx.y + j;
        if (r < rows && c < cols) tile[threadIdx.y + j][threadIdx.x] = __ldg(in + (size_t)r * cols + c);
    }
    __syncthreads();
    int r = r0 + threadIdx.x;
    for (int j = 0; j < 32; j += 8) {
        int oc = c0 + threadIdx.y + j;
        if (oc < cols && r < rows) out[(size_t)oc * rows + r] = tile[threadIdx.y + j][threadIdx.x];
    }
}
