#include <cuda_runtime.h>

__global__ void sigmoid_kernel(float *dst, const float *src, int n)
{
    int gid = blockIdx.x * blockDim.x + threadIdx.x;  // @hole
    if (gid < n) {  // @hole
        dst[gid] = 1.0f / (1.0f + expf(-src[gid]));  // @hole midline=dst[gid] =
    }
}
