#include <cuda_runtime.h>
#include <stdio.h>

__global__ void square(float *d, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) d[i] = d[i] * d[i];
}

int runSquare(float *d, int n)
{
    square<<<(n + 255) / 256, 256>>>(d, n);
    cudaError_t err = cudaGetLastError();  // @hole midline=cudaError_t err =
    if (err != cudaSuccess) {  // @hole
        printf("launch failed: %s\n", cudaGetErrorString(err));
        return -1;
    }
    err = cudaDeviceSynchronize();  // @hole midline=err =
    if (err != cudaSuccess) {
        printf("kernel failed: %s\n", cudaGetErrorString(err));
        return -1;
    }
    return 0;
}
