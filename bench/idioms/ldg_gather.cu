#include <cuda_runtime.h>

__global__ void gatherLdg(const float *__restrict__ src, const int *__restrict__ indices, float *dst, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        int j = __ldg(&indices[i]);  // @hole midline=int j =
        dst[i] = __ldg(&src[j]);  // @hole
    }
}
