#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#define CUDA_CHECK(call)                                                  \
    do {                                                                  \
        cudaError_t err = (call);                                         \
        if (err != cudaSuccess) {                                         \
            fprintf(stderr, "CUDA error %s at %s:%d\n",                   \
                    cudaGetErrorString(err), __FILE__, __LINE__);         \
            exit(EXIT_FAILURE);                                           \
        }                                                                 \
    } while (0)

__global__ void fill(int *a, int value, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) a[i] = value;
}

int main()
{
    int n = 1000;
    int *d_a;
    CUDA_CHECK(cudaMalloc(&d_a, n * sizeof(int)));  // @hole midline=CUDA_CHECK(
    fill<<<(n + 127) / 128, 128>>>(d_a, 7, n);
    CUDA_CHECK(cudaGetLastError());  // @hole
    CUDA_CHECK(cudaDeviceSynchronize());  // @hole
    CUDA_CHECK(cudaFree(d_a));
    return 0;
}
