// wrong: the filter is applied flipped (filt[2-dy][2-dx]: a true convolution, not the cross-correlation asked for).
#include <cuda_runtime.h>

__global__ void conv2d_5x5(float* out, const float* img, const float* filt, int H, int W) {
    int x = blockIdx.x * 32 + threadIdx.x;
    for (int i = 0; i < 4; ++i) {
        int y = blockIdx.y * 32 + threadIdx.y * 4 + i;
        if (x < W && y < H) {
            float acc = 0.0f;
            for (int dy = -2; dy <= 2; ++dy) {
                for (int dx = -2; dx <= 2; ++dx) {
                    int yy = y + dy, xx = x + dx;
                    if (yy >= 0 && yy < H && xx >= 0 && xx < W)
                        acc += img[(size_t)yy * W + xx] * filt[(2 - dy) * 5 + (2 - dx)];
                }
            }
            out[(size_t)y * W + x] = acc;
        }
    }
}
