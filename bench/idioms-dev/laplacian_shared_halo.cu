#include <cuda_runtime.h>

#define BX 16
#define BY 16

__global__ void laplacian(const float *in, float *out, int w, int h)
{
    __shared__ float s[BY + 2][BX + 2];
    int x = blockIdx.x * BX + threadIdx.x;
    int y = blockIdx.y * BY + threadIdx.y;
    int tx = threadIdx.x + 1;
    int ty = threadIdx.y + 1;
    bool inside = x < w && y < h;
    if (inside) s[ty][tx] = in[y * w + x];
    if (threadIdx.x == 0 && x > 0 && y < h) s[ty][0] = in[y * w + x - 1];
    if (threadIdx.x == BX - 1 && x < w - 1 && y < h) s[ty][BX + 1] = in[y * w + x + 1];  // @hole
    if (threadIdx.y == 0 && y > 0 && x < w) s[0][tx] = in[(y - 1) * w + x];
    if (threadIdx.y == BY - 1 && y < h - 1 && x < w) s[BY + 1][tx] = in[(y + 1) * w + x];
    __syncthreads();  // @hole
    if (inside && x > 0 && y > 0 && x < w - 1 && y < h - 1)
        out[y * w + x] = s[ty][tx - 1] + s[ty][tx + 1] + s[ty - 1][tx] + s[ty + 1][tx] - 4.0f * s[ty][tx];  // @hole midline=out[y * w + x] =
}
