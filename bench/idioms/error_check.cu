#include <cstdio>
#include <cuda_runtime.h>

__global__ void negate(float *v, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) v[i] = -v[i];
}

int launchNegate(float *d_v, int n)
{
    negate<<<(n + 127) / 128, 128>>>(d_v, n);
    cudaError_t err = cudaGetLastError();  // @hole midline=cudaError_t err =
    if (err != cudaSuccess) {  // @hole
        fprintf(stderr, "negate failed: %s\n", cudaGetErrorString(err));
        return 1;
    }
    return 0;
}
