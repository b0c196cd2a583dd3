#include <cuda_runtime.h>

__global__ void increment(float *data, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) data[i] += 1.0f;
}

void processAsync(float *h_data, float *d_data, int n)
{
    cudaStream_t stream;
    cudaStreamCreate(&stream);  // @hole
    size_t bytes = n * sizeof(float);
    cudaMemcpyAsync(d_data, h_data, bytes, cudaMemcpyHostToDevice, stream);
    increment<<<(n + 255) / 256, 256, 0, stream>>>(d_data, n);  // @hole midline=increment<<<(n + 255) / 256, 256,
    cudaMemcpyAsync(h_data, d_data, bytes, cudaMemcpyDeviceToHost, stream);
    cudaStreamSynchronize(stream);
    cudaStreamDestroy(stream);
}
