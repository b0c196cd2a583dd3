// wrong: writes the running sum before adding the element (an exclusive scan): every output is one element short.
#include <cuda_runtime.h>

#define SEGMENT 1024

__global__ void segmented_scan(float* out, const float* x, int n) {
    if (threadIdx.x != 0) return;
    int start = blockIdx.x * SEGMENT;
    int end = min(start + SEGMENT, n);
    float s = 0.0f;
    for (int i = start; i < end; ++i) {
        out[i] = s;
        s += x[i];
    }
}
