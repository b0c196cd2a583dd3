#include <cuda_runtime.h>
#include <cuda_fp16.h>

__global__ void haxpy(int n, __half a, const __half *x, __half *y)
{
    int start = threadIdx.x + blockDim.x * blockIdx.x;
    int stride = blockDim.x * gridDim.x;
    for (int i = start; i < n; i += stride) {  // @hole
        y[i] = __hfma(a, x[i], y[i]);  // @hole midline=y[i] =
    }
}
