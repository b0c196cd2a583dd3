// 2D convolution (cross-correlation, as in deep learning) of one H x W float32 image with a 5x5 filter, zero
// padding, same-size output: out[y][x] = sum_{dy,dx in -2..2} img[y+dy][x+dx] * filt[dy+2][dx+2].
// The original: a 32x8 block covers a 32x32 output tile, each thread 4 consecutive rows of one column; every
// tap is a bounds-checked load from global memory.
#include <cuda_runtime.h>

/* dice:launch
kernel = "conv2d_5x5"
sizes = { H = 8192, W = 8192 }
grid = ["cdiv(W, 32)", "cdiv(H, 32)"]
block = [32, 8]
args = [
  { name = "out", role = "out", dtype = "float32", shape = ["H", "W"] },
  { name = "img", role = "in", dtype = "float32", shape = ["H", "W"] },
  { name = "filt", role = "in", dtype = "float32", shape = [25] },
  { name = "H", role = "scalar", dtype = "int32", value = "H" },
  { name = "W", role = "scalar", dtype = "int32", value = "W" },
]
*/
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
                        acc += img[(size_t)yy * W + xx] * filt[(dy + 2) * 5 + (dx + 2)];
                }
            }
            out[(size_t)y * W + x] = acc;
        }
    }
}
