#include <cuda_runtime.h>

__global__ void saxpyGridStride(int n, float a, const float *x, float *y)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {  // @hole
        y[i] = a * x[i] + y[i];
    }
}
