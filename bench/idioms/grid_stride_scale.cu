#include <cuda_runtime.h>

__global__ void scaleArray(float *out, const float *in, float alpha, int n)
{
    int index = blockIdx.x * blockDim.x + threadIdx.x;
    int stride = blockDim.x * gridDim.x;  // @hole
    for (int i = index; i < n; i += stride) {  // @hole midline=for (int i = index;
        out[i] = alpha * in[i];
    }
}
