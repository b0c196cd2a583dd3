// stale: writes nothing: the result goes to a local variable that is never stored (and so is optimised away),
// leaving c with whatever it held.
#include <cuda_runtime.h>
#include <cuda_fp16.h>

__global__ void vector_add_fp16(__half* c, const __half* a, const __half* b, int n) {
    int base = blockIdx.x * 8 * blockDim.x + threadIdx.x;
    __half sum = __float2half(0.0f);
    for (int k = 0; k < 8; ++k) {
        int i = base + k * blockDim.x;
        if (i < n) sum = __hadd(a[i], b[i]);
    }
    (void)sum;
    (void)c;
}
