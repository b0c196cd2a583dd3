#include <cuda_runtime.h>
#include <cuda_fp16.h>

__global__ void halfToFloat(const __half *in, float *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = __half2float(in[i]);
}

__global__ void scaleHalf(__half *data, float s, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = __half2float(data[i]);  // @hole midline=float v =
        data[i] = __float2half(v * s);  // @hole midline=data[i] =
    }
}
