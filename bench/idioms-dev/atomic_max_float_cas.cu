#include <cuda_runtime.h>

__device__ float atomicMaxFloat(float *addr, float value)
{
    int *addr_as_int = (int *)addr;
    int old = *addr_as_int;
    int assumed;
    do {
        assumed = old;
        old = atomicCAS(addr_as_int, assumed, __float_as_int(fmaxf(value, __int_as_float(assumed))));  // @hole midline=old = atomicCAS(
    } while (assumed != old);  // @hole
    return __int_as_float(old);
}

__global__ void maxReduce(const float *data, float *result, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        atomicMaxFloat(result, data[i]);
}
