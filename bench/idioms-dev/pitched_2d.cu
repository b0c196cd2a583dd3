#include <cuda_runtime.h>

__global__ void addOnePitched(float *devPtr, size_t pitch, int width, int height)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    int r = blockIdx.y * blockDim.y + threadIdx.y;
    if (r < height && c < width) {
        float *row = (float *)((char *)devPtr + r * pitch);  // @hole midline=float *row =
        row[c] += 1.0f;
    }
}

void runPitched(const float *h_in, float *h_out, int width, int height)
{
    float *d_ptr;
    size_t pitch;
    cudaMallocPitch(&d_ptr, &pitch, width * sizeof(float), height);  // @hole
    cudaMemcpy2D(d_ptr, pitch, h_in, width * sizeof(float), width * sizeof(float), height, cudaMemcpyHostToDevice);
    dim3 block(32, 8);
    dim3 grid((width + 31) / 32, (height + 7) / 8);
    addOnePitched<<<grid, block>>>(d_ptr, pitch, width, height);
    cudaMemcpy2D(h_out, width * sizeof(float), d_ptr, pitch, width * sizeof(float), height, cudaMemcpyDeviceToHost);
    cudaFree(d_ptr);  // @hole
}
