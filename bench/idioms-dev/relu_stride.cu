#include <cuda_runtime.h>

__global__ void relu(const float *in, float *out, int n)
{
    int tid = blockIdx.x * blockDim.x + threadIdx.x;
    int stride = blockDim.x * gridDim.x;  // @hole
    while (tid < n) {
        out[tid] = fmaxf(in[tid], 0.0f);  // @hole midline=out[tid] =
        tid += stride;  // @hole
    }
}
