#include <cuda_runtime.h>

__global__ void addFloat4(const float *a, const float *b, float *c, int n)
{
    int i = (blockIdx.x * blockDim.x + threadIdx.x) * 4;
    if (i + 3 < n) {
        float4 va = *reinterpret_cast<const float4 *>(&a[i]);
        float4 vb = *reinterpret_cast<const float4 *>(&b[i]);  // @hole midline=float4 vb =
        float4 vc = make_float4(va.x + vb.x, va.y + vb.y, va.z + vb.z, va.w + vb.w);
        *reinterpret_cast<float4 *>(&c[i]) = vc;
    } else {
        for (int j = i; j < n; j++) c[j] = a[j] + b[j];
    }
}
