#include <cuda_runtime.h>

__global__ void normalize_by(float *out, const float *num, const float *den, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)  // @hole
        return;
    out[i] = __fdividef(num[i], den[i] + 1e-6f);  // @hole midline=out[i] =
}
