#include <cuda_runtime.h>

__global__ void gemvWarp(const float *__restrict__ A, const float *__restrict__ x, float *__restrict__ y, int M, int N)
{
    int warpId = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
    int lane = threadIdx.x % 32;
    if (warpId >= M) return;
    float sum = 0.0f;
    for (int j = lane; j < N; j += 32) {
        sum += A[warpId * N + j] * x[j];
    }
    for (int offset = 16; offset > 0; offset /= 2)
        sum += __shfl_down_sync(0xffffffff, sum, offset);  // @hole midline=sum +=
    if (lane == 0) y[warpId] = sum;  // @hole
}
