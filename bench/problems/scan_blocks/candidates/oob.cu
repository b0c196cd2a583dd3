// oob: the original's loop with the end of the last segment not clamped to n (end = start + 1024): when n is not
// a multiple of 1024 the last block reads and writes past the end of x and out.
#include <cuda_runtime.h>

#define SEGMENT 1024

__global__ void segmented_scan(float* out, const float* x, int n) {
    if (threadIdx.x != 0) return;
    int start = blockIdx.x * SEGMENT;
    int end = start + SEGMENT;
    float s = 0.0f;
    for (int i = start; i < end; ++i) {
        s += x[i];
        out[i] = s;
    }
}
