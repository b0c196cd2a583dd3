#include <cuda_runtime.h>

__global__ void inclusiveScan(const float *in, float *out, int n)
{
    extern __shared__ float temp[];
    int tid = threadIdx.x;
    temp[tid] = (tid < n) ? in[tid] : 0.0f;
    __syncthreads();
    for (int offset = 1; offset < n; offset *= 2) {  // @hole
        float t = 0.0f;
        if (tid >= offset)
            t = temp[tid - offset];  // @hole midline=t =
        __syncthreads();
        temp[tid] += t;
        __syncthreads();
    }
    if (tid < n) out[tid] = temp[tid];  // @hole
}
