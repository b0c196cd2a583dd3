#include <cuda_runtime.h>

__global__ void gather(float *__restrict__ out, const float *__restrict__ table,
                       const int *__restrict__ indices, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        int k = __ldg(&indices[i]);  // @hole
        out[i] = __ldg(&table[k]);  // @hole midline=out[i] =
    }
}

__global__ void axpy_ldg(float *y, const float *x, float a, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] += a * __ldg(x + i);  // @hole
}
