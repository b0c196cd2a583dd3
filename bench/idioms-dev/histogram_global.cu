#include <cuda_runtime.h>

#define NUM_BINS 256

__global__ void histogram(const unsigned char *data, unsigned int *hist, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int stride = blockDim.x * gridDim.x;
    while (i < n) {
        atomicAdd(&hist[data[i]], 1);  // @hole
        i += stride;  // @hole midline=i +=
    }
}

__global__ void histogramFloat(const float *x, int *bins, int n, float lo, float hi)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int b = (int)((x[i] - lo) / (hi - lo) * NUM_BINS);
    b = min(max(b, 0), NUM_BINS - 1);  // @hole midline=b =
    atomicAdd(&bins[b], 1);
}
