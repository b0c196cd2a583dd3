#include <cuda_runtime.h>

__global__ void scalePitched(float *devPtr, size_t pitch, int width, int height, float s)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    int r = blockIdx.y * blockDim.y + threadIdx.y;
    if (r < height && c < width) {
        float *row = (float *)((char *)devPtr + r * pitch);  // @hole midline=float *row =
        row[c] *= s;
    }
}

void allocPitched(float **devPtr, size_t *pitch, int width, int height)
{
    cudaMallocPitch((void **)devPtr, pitch, width * sizeof(float), height);
}
