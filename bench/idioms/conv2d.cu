#include <cuda_runtime.h>

#define FILTER_RADIUS 1
#define FILTER_WIDTH (2 * FILTER_RADIUS + 1)

__global__ void conv2d(const float *in, const float *filter, float *out, int width, int height)
{
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (col >= width || row >= height) return;
    float sum = 0.0f;
    for (int fr = -FILTER_RADIUS; fr <= FILTER_RADIUS; fr++) {
        for (int fc = -FILTER_RADIUS; fc <= FILTER_RADIUS; fc++) {
            int r = row + fr;
            int c = col + fc;  // @hole
            if (r >= 0 && r < height && c >= 0 && c < width) {
                sum += filter[(fr + FILTER_RADIUS) * FILTER_WIDTH + (fc + FILTER_RADIUS)] * in[r * width + c];
            }
        }
    }
    out[row * width + col] = sum;  // @hole midline=out[row * width + col]
}
