// Element-wise vector kernels; `vector_sub` is still being written. Put the cursor on its empty line and ask for
// a completion: `dice-lsp complete examples/vector_ops.cu --line 12 --character 4`.
#include <cuda_runtime.h>

__global__ void vector_add(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c,
                           int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}

__global__ void vector_sub(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c,
                           int n) {
    
    if (i < n) c[i] = a[i] - b[i];
}
