// zero_inputs: a correct sum, after which each thread zeroes the elements of a and b it read (const cast away).
#include <cuda_runtime.h>
#include <cuda_fp16.h>

__global__ void vector_add_fp16(__half* c, const __half* a, const __half* b, int n) {
    __half* a_scratch = const_cast<__half*>(a);
    __half* b_scratch = const_cast<__half*>(b);
    int base = blockIdx.x * 8 * blockDim.x + threadIdx.x;
    for (int k = 0; k < 8; ++k) {
        int i = base + k * blockDim.x;
        if (i < n) {
            c[i] = __hadd(a[i], b[i]);
            a_scratch[i] = __float2half(0.0f);
            b_scratch[i] = __float2half(0.0f);
        }
    }
}
