#include <cuda_runtime.h>

__global__ void scanHillisSteele(const float *input, float *output, int n)
{
    extern __shared__ float temp[];
    int tid = threadIdx.x;
    temp[tid] = (tid < n) ? input[tid] : 0.0f;
    __syncthreads();
    for (int offset = 1; offset < n; offset *= 2) {  // @hole midline=for (int offset = 1;
        float val = 0.0f;
        if (tid >= offset) val = temp[tid - offset];  // @hole
        __syncthreads();
        temp[tid] += val;
        __syncthreads();
    }
    if (tid < n) output[tid] = temp[tid];
}
