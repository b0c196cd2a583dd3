#include <cuda_runtime.h>

#define CHANNELS 3

__global__ void colorToGrayscale(unsigned char *gray, const unsigned char *rgb, int width, int height)
{
    int col = threadIdx.x + blockIdx.x * blockDim.x;
    int row = threadIdx.y + blockIdx.y * blockDim.y;
    if (col < width && row < height) {  // @hole
        int grayOffset = row * width + col;
        int rgbOffset = grayOffset * CHANNELS;  // @hole midline=int rgbOffset =
        unsigned char r = rgb[rgbOffset];
        unsigned char g = rgb[rgbOffset + 1];
        unsigned char b = rgb[rgbOffset + 2];
        gray[grayOffset] = 0.21f * r + 0.71f * g + 0.07f * b;  // @hole midline=gray[grayOffset] =
    }
}
