// good: one float4 load and store per thread (16-byte aligned, full quad), scalar fallback for the tail or a
// misaligned buffer; GELU as x * sigmoid(2u) (the same function as 0.5 x (1 + tanh u)) with one __expf.
#include <cuda_runtime.h>
#include <stdint.h>

__device__ __forceinline__ float gelu_fast(float v) {
    float u = 0.7978845608f * (v + 0.044715f * v * v * v);
    return v / (1.0f + __expf(-2.0f * u));  // exp overflows to inf for very negative v: v / inf = -0, as tanh gives
}

__global__ void gelu(float* y, const float* x, int n) {
    int i = (blockIdx.x * blockDim.x + threadIdx.x) * 4;  // blockDim 256: a block covers 1024 elements, as the grid says
    bool aligned = ((reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(y)) & 15) == 0;
    if (aligned && i + 3 < n) {
        float4 v = __ldg(reinterpret_cast<const float4*>(x + i));
        float4 r;
        r.x = gelu_fast(v.x);
        r.y = gelu_fast(v.y);
        r.z = gelu_fast(v.z);
        r.w = gelu_fast(v.w);
        *reinterpret_cast<float4*>(y + i) = r;
    } else {
        for (int k = i; k < n && k < i + 4; ++k) y[k] = gelu_fast(x[k]);
    }
}
