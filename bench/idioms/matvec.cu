#include <cuda_runtime.h>

__global__ void matVec(const float *A, const float *x, float *y, int rows, int cols)
{
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < rows) {  // @hole
        float sum = 0.0f;
        for (int j = 0; j < cols; ++j) {
            sum += A[row * cols + j] * x[j];  // @hole midline=sum +=
        }
        y[row] = sum;
    }
}
