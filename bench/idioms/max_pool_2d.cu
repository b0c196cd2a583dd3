#include <cuda_runtime.h>

__global__ void maxPool2x2(const float *in, float *out, int width, int height)
{
    int ox = blockIdx.x * blockDim.x + threadIdx.x;
    int oy = blockIdx.y * blockDim.y + threadIdx.y;
    int outW = width / 2;
    int outH = height / 2;
    if (ox >= outW || oy >= outH) return;  // @hole
    int ix = ox * 2;
    int iy = oy * 2;
    float m = in[iy * width + ix];
    m = fmaxf(m, in[iy * width + ix + 1]);
    m = fmaxf(m, in[(iy + 1) * width + ix]);  // @hole midline=m = fmaxf(m,
    m = fmaxf(m, in[(iy + 1) * width + ix + 1]);
    out[oy * outW + ox] = m;
}
