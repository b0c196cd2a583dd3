#include <cuda_runtime.h>

__global__ void compactPositive(const float *in, float *out, int *count, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n && in[i] > 0.0f) {
        int pos = atomicAdd(count, 1);  // @hole midline=int pos =
        out[pos] = in[i];  // @hole
    }
}
