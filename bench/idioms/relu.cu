#include <cuda_runtime.h>

__global__ void relu(const float *input, float *output, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {  // @hole
        output[i] = fmaxf(input[i], 0.0f);  // @hole midline=output[i] =
    }
}
