// oob: the shared-memory kernel without the bounds check on its stores: at sizes that are not multiples of 32
// the edge tiles write past the end of each row and, in the last tile row, past the end of out.
#include <cuda_runtime.h>

#define TILE 32
#define R 2
#define SPAN (TILE + 2 * R)  // 36

__global__ void conv2d_5x5(float* out, const float* img, const float* filt, int H, int W) {
    __shared__ float tile[SPAN][SPAN + 1];
    const int tx = threadIdx.x, ty = threadIdx.y;  // block 32 x 8
    const int x0 = blockIdx.x * TILE, y0 = blockIdx.y * TILE;
    for (int t = ty * 32 + tx; t < SPAN * SPAN; t += 256) {
        int sr = t / SPAN, sc = t - sr * SPAN;
        int gy = y0 - R + sr, gx = x0 - R + sc;
        tile[sr][sc] = (gy >= 0 && gy < H && gx >= 0 && gx < W) ? __ldg(img + (size_t)gy * W + gx) : 0.0f;
    }
    float f[25];
#pragma unroll
    for (int k = 0; k < 25; ++k) f[k] = __ldg(filt + k);
    __syncthreads();

    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    const int base = ty * 4;  // outputs y0 + base + i read tile rows base + i .. base + i + 4
#pragma unroll
    for (int dx = 0; dx < 5; ++dx) {
        float v[8];
#pragma unroll
        for (int k = 0; k < 8; ++k) v[k] = tile[base + k][tx + dx];
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
            for (int dy = 0; dy < 5; ++dy) acc[i] = fmaf(v[i + dy], f[dy * 5 + dx], acc[i]);
    }
    int x = x0 + tx;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        int y = y0 + base + i;
        out[(size_t)y * W + x] = acc[i];
    }
}
