#include <cuda_runtime.h>

__global__ void initIdentity(float *mat, int n)
{
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < n && col < n) {
        mat[row * n + col] = (row == col) ? 1.0f : 0.0f;  // @hole midline=mat[row * n + col] =
    }
}

__global__ void blockSum2d(const float *in, float *blockSums)
{
    __shared__ float sdata[256];
    int tid = threadIdx.y * blockDim.x + threadIdx.x;  // @hole
    int bid = blockIdx.y * gridDim.x + blockIdx.x;
    int gid = bid * (blockDim.x * blockDim.y) + tid;
    sdata[tid] = in[gid];
    __syncthreads();
    for (int s = (blockDim.x * blockDim.y) / 2; s > 0; s >>= 1) {
        if (tid < s) sdata[tid] += sdata[tid + s];
        __syncthreads();
    }
    if (tid == 0) blockSums[bid] = sdata[0];
}
