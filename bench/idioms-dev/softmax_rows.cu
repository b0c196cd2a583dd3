#include <cuda_runtime.h>

__global__ void softmax(const float *input, float *output, int rows, int cols)
{
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= rows) return;
    const float *x = input + row * cols;
    float *y = output + row * cols;
    float maxval = x[0];
    for (int j = 1; j < cols; j++)
        maxval = fmaxf(maxval, x[j]);  // @hole midline=maxval =
    float sum = 0.0f;
    for (int j = 0; j < cols; j++) {
        y[j] = expf(x[j] - maxval);  // @hole
        sum += y[j];
    }
    for (int j = 0; j < cols; j++)
        y[j] /= sum;  // @hole midline=y[j]
}
