#include <cuda_runtime.h>
#include <cfloat>

__global__ void softmaxRow(const float *input, float *output, int cols)
{
    extern __shared__ float buf[];
    int row = blockIdx.x;
    int tid = threadIdx.x;
    const float *x = input + row * cols;
    float *y = output + row * cols;

    float maxVal = -FLT_MAX;
    for (int i = tid; i < cols; i += blockDim.x) {
        maxVal = fmaxf(maxVal, x[i]);
    }
    buf[tid] = maxVal;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) buf[tid] = fmaxf(buf[tid], buf[tid + s]);
        __syncthreads();
    }
    maxVal = buf[0];
    __syncthreads();

    float sum = 0.0f;
    for (int i = tid; i < cols; i += blockDim.x) {
        sum += expf(x[i] - maxVal);  // @hole
    }
    buf[tid] = sum;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) buf[tid] += buf[tid + s];
        __syncthreads();
    }
    sum = buf[0];

    for (int i = tid; i < cols; i += blockDim.x) {
        y[i] = expf(x[i] - maxVal) / sum;  // @hole midline=y[i] =
    }
}
