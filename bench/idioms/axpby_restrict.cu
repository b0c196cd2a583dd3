#include <cuda_runtime.h>

__global__ void axpby(const float *__restrict__ x, const float *__restrict__ y, float *__restrict__ z,
                      float alpha, float beta, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;  // @hole
    if (i < n) {
        z[i] = alpha * x[i] + beta * y[i];  // @hole midline=z[i] =
    }
}
