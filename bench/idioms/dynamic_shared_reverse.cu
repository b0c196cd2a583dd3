#include <cuda_runtime.h>

__global__ void dynamicReverse(int *d, int n)
{
    extern __shared__ int s[];  // @hole
    int t = threadIdx.x;
    int tr = n - t - 1;
    s[t] = d[t];
    __syncthreads();
    d[t] = s[tr];
}

void reverse(int *d_d, int n)
{
    dynamicReverse<<<1, n, n * sizeof(int)>>>(d_d, n);  // @hole midline=dynamicReverse<<<1, n,
}
