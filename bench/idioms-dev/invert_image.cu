#include <cuda_runtime.h>

__global__ void invert(unsigned char *img, int width, int height)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;  // @hole midline=int y =
    if (x >= width || y >= height) return;  // @hole
    img[y * width + x] = 255 - img[y * width + x];  // @hole midline=img[y * width + x] =
}

void launch_invert(unsigned char *d_img, int width, int height)
{
    dim3 block(16, 16);
    dim3 grid((width + block.x - 1) / block.x, (height + block.y - 1) / block.y);
    invert<<<grid, block>>>(d_img, width, height);
}
