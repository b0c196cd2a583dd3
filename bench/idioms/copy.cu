#include <cuda_runtime.h>

__global__ void copyKernel(const float *__restrict__ src, float *__restrict__ dst, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        dst[i] = src[i];  // @hole
    }
}

__global__ void copyGridStride(const int *in, int *out, int N)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < N; i += blockDim.x * gridDim.x) {  // @hole midline=for (int i =
        out[i] = in[i];
    }
}
