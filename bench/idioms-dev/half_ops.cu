#include <cuda_runtime.h>
#include <cuda_fp16.h>

__global__ void halfAdd(const __half *a, const __half *b, __half *c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        c[i] = __hadd(a[i], b[i]);  // @hole
}

__global__ void halfToFloat(const __half *in, float *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = __half2float(in[i]);  // @hole
}

__global__ void scaleHalf2(__half2 *x, float s, int n2)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n2)
        x[i] = __hmul2(x[i], __float2half2_rn(s));  // @hole midline=x[i] =
}
