// hang: a chained scan that waits for the previous segment to publish its total, through a flag in shared memory
// that is never set (and is not visible to other blocks anyway): every thread spins for ever.
#include <cuda_runtime.h>

#define SEGMENT 1024

__global__ void segmented_scan(float* out, const float* x, int n) {
    __shared__ volatile int previous_done;
    if (threadIdx.x == 0) previous_done = 0;
    __syncthreads();
    while (!previous_done) __nanosleep(1000);
    if (threadIdx.x != 0) return;
    int start = blockIdx.x * SEGMENT;
    int end = min(start + SEGMENT, n);
    float s = 0.0f;
    for (int i = start; i < end; ++i) {
        s += x[i];
        out[i] = s;
    }
}
