#include <cuda_runtime.h>

__global__ void softmaxNaive(const float *x, float *y, int rows, int cols)
{
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= rows) return;  // @hole
    float maxVal = x[row * cols];
    for (int j = 1; j < cols; j++) {
        maxVal = fmaxf(maxVal, x[row * cols + j]);
    }
    float sum = 0.0f;
    for (int j = 0; j < cols; j++) {
        y[row * cols + j] = expf(x[row * cols + j] - maxVal);
        sum += y[row * cols + j];  // @hole midline=sum +=
    }
    for (int j = 0; j < cols; j++) {
        y[row * cols + j] /= sum;
    }
}
