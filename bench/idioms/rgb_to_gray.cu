#include <cuda_runtime.h>

__global__ void rgbToGray(const unsigned char *rgb, unsigned char *gray, int width, int height)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= width || y >= height) return;  // @hole
    int idx = y * width + x;
    unsigned char r = rgb[3 * idx];
    unsigned char g = rgb[3 * idx + 1];
    unsigned char b = rgb[3 * idx + 2];
    gray[idx] = (unsigned char)(0.299f * r + 0.587f * g + 0.114f * b);
}

void launchRgbToGray(const unsigned char *rgb, unsigned char *gray, int width, int height)
{
    dim3 block(16, 16);
    dim3 grid((width + block.x - 1) / block.x, (height + block.y - 1) / block.y);  // @hole midline=dim3 grid(
    rgbToGray<<<grid, block>>>(rgb, gray, width, height);
}
