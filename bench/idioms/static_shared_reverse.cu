#include <cuda_runtime.h>

#define N 64

__global__ void staticReverse(int *d, int n)
{
    __shared__ int s[N];  // @hole midline=__shared__ int
    int t = threadIdx.x;
    int tr = n - t - 1;
    s[t] = d[t];  // @hole
    __syncthreads();
    d[t] = s[tr];
}
