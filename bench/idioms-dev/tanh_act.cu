#include <cuda_runtime.h>

__global__ void tanh_forward(float *result, const float *input, int size)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < size)  // @hole
        result[i] = tanhf(input[i]);  // @hole midline=result[i] =
}

__global__ void tanh_backward(float *grad_in, const float *grad_out, const float *y, int size)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < size)
        grad_in[i] = grad_out[i] * (1.0f - y[i] * y[i]);  // @hole
}
