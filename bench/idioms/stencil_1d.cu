#include <cuda_runtime.h>

#define RADIUS 3
#define BLOCK_SIZE 256

__global__ void stencil1d(const int *in, int *out, int n)
{
    __shared__ int temp[BLOCK_SIZE + 2 * RADIUS];
    int gindex = threadIdx.x + blockIdx.x * blockDim.x;
    int lindex = threadIdx.x + RADIUS;

    temp[lindex] = (gindex < n) ? in[gindex] : 0;
    if (threadIdx.x < RADIUS) {
        temp[lindex - RADIUS] = (gindex >= RADIUS) ? in[gindex - RADIUS] : 0;
        temp[lindex + BLOCK_SIZE] = (gindex + BLOCK_SIZE < n) ? in[gindex + BLOCK_SIZE] : 0;
    }
    __syncthreads();  // @hole

    if (gindex < n) {
        int result = 0;
        for (int offset = -RADIUS; offset <= RADIUS; offset++)  // @hole midline=for (int offset =
            result += temp[lindex + offset];
        out[gindex] = result;
    }
}
