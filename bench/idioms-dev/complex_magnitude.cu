#include <cuda_runtime.h>

__global__ void magnitude(const float2 *z, float *mag, int n)
{
    int i = threadIdx.x + blockIdx.x * blockDim.x;  // @hole
    if (i < n) {
        float2 v = z[i];  // @hole midline=float2 v =
        mag[i] = sqrtf(v.x * v.x + v.y * v.y);  // @hole midline=mag[i] =
    }
}
