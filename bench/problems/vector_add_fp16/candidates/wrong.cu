// wrong: adds a to itself (a typo: a[i] + a[i]); b is never read.
#include <cuda_runtime.h>
#include <cuda_fp16.h>

__global__ void vector_add_fp16(__half* c, const __half* a, const __half* b, int n) {
    int base = blockIdx.x * 8 * blockDim.x + threadIdx.x;
    for (int k = 0; k < 8; ++k) {
        int i = base + k * blockDim.x;
        if (i < n) c[i] = __hadd(a[i], a[i]);
    }
}
