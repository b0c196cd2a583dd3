#include <cuda_runtime.h>

__global__ void vecAdd(const float *a, const float *b, float *c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;  // @hole
    if (i < n) {
        c[i] = a[i] + b[i];  // @hole midline=c[i] =
    }
}
