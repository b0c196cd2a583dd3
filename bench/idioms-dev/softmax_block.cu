#include <cuda_runtime.h>
#include <float.h>

__global__ void softmax_block(float *out, const float *in, int N)
{
    extern __shared__ float smem[];
    int row = blockIdx.x;
    int tid = threadIdx.x;
    const float *x = in + (size_t)row * N;
    float m = -FLT_MAX;
    for (int i = tid; i < N; i += blockDim.x)
        m = fmaxf(m, x[i]);
    smem[tid] = m;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) smem[tid] = fmaxf(smem[tid], smem[tid + s]);  // @hole midline=if (tid < s)
        __syncthreads();
    }
    float rowMax = smem[0];
    __syncthreads();
    float sum = 0.0f;
    for (int i = tid; i < N; i += blockDim.x)
        sum += expf(x[i] - rowMax);  // @hole
    smem[tid] = sum;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) smem[tid] += smem[tid + s];
        __syncthreads();
    }
    float inv = 1.0f / smem[0];
    for (int i = tid; i < N; i += blockDim.x)
        out[(size_t)row * N + i] = expf(x[i] - rowMax) * inv;  // @hole midline=out[(size_t)row * N + i] =
}
