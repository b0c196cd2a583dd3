// Element-wise vector addition. Put the cursor on the empty line in the kernel body and ask for a
// completion: `dice-lsp complete examples/vector_add.cu --line 7 --character 4`.
#include <cuda_runtime.h>

__global__ void vector_add(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c,
                           int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    
}

void launch_vector_add(const float* a, const float* b, float* c, int n, cudaStream_t stream) {
    int threads = 256;
    int blocks = (n + threads - 1) / threads;
    vector_add<<<blocks, threads, 0, stream>>>(a, b, c, n);
}
