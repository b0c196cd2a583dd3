#include <cuda_runtime.h>

__global__ void scaleFloat4(const float4 *in, float4 *out, float s, int n4)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n4) {
        float4 v = in[i];  // @hole
        v.x *= s;
        v.y *= s;
        v.z *= s;
        v.w *= s;
        out[i] = v;  // @hole
    }
}
