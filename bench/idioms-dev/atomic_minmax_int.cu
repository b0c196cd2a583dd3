#include <cuda_runtime.h>
#include <limits.h>

__global__ void minMax(const int *arr, int *minVal, int *maxVal, int n)
{
    int tid = blockIdx.x * blockDim.x + threadIdx.x;
    for (; tid < n; tid += blockDim.x * gridDim.x) {  // @hole midline=for (;
        atomicMin(minVal, arr[tid]);
        atomicMax(maxVal, arr[tid]);  // @hole
    }
}

void initMinMax(int *d_min, int *d_max)
{
    int hmin = INT_MAX, hmax = INT_MIN;
    cudaMemcpy(d_min, &hmin, sizeof(int), cudaMemcpyHostToDevice);  // @hole
    cudaMemcpy(d_max, &hmax, sizeof(int), cudaMemcpyHostToDevice);
}
