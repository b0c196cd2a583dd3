#include <cuda_runtime.h>

__global__ void copyVec4(float *dst, const float *src, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int n4 = n / 4;
    if (i < n4) {
        float4 v = reinterpret_cast<const float4 *>(src)[i];  // @hole midline=float4 v =
        reinterpret_cast<float4 *>(dst)[i] = v;  // @hole
    }
    if (i == 0) {
        for (int j = n4 * 4; j < n; j++)
            dst[j] = src[j];
    }
}
