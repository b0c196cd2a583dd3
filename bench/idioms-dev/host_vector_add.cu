#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

__global__ void vector_add(float *out, const float *a, const float *b, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] + b[i];
}

int main()
{
    const int N = 1 << 20;
    size_t bytes = N * sizeof(float);
    float *h_a = (float *)malloc(bytes);
    float *h_b = (float *)malloc(bytes);
    float *h_out = (float *)malloc(bytes);
    float *d_a, *d_b, *d_out;
    cudaMalloc((void **)&d_a, bytes);
    cudaMalloc((void **)&d_b, bytes);  // @hole
    cudaMalloc((void **)&d_out, bytes);
    cudaMemcpy(d_a, h_a, bytes, cudaMemcpyHostToDevice);
    cudaMemcpy(d_b, h_b, bytes, cudaMemcpyHostToDevice);  // @hole midline=cudaMemcpy(d_b,
    vector_add<<<(N + 255) / 256, 256>>>(d_out, d_a, d_b, N);
    cudaMemcpy(h_out, d_out, bytes, cudaMemcpyDeviceToHost);  // @hole midline=cudaMemcpy(h_out,
    printf("out[0] = %f\n", h_out[0]);
    cudaFree(d_a);
    cudaFree(d_b);
    cudaFree(d_out);
    free(h_a);
    free(h_b);
    free(h_out);
    return 0;
}
