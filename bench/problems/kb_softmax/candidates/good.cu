// good: one 256-thread block per row; the row (up to 8192 floats) is read once into registers, 32 per thread,
// max and sum are block reductions (warp shuffles + shared memory), and the result is written once. Longer rows
// fall back to three passes over global memory.
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cuda_runtime.h>
#include <math.h>

#define THREADS 256
#define PER_THREAD 32  // registers per thread: rows up to THREADS * PER_THREAD = 8192 stay on chip

__device__ __forceinline__ float warp_max(float v) {
    for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
    return v;
}

__device__ __forceinline__ float warp_sum(float v) {
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
    return v;
}

__device__ __forceinline__ float block_max(float v, float* scratch) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = warp_max(v);
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    v = lane < THREADS / 32 ? scratch[lane] : -INFINITY;
    v = warp_max(v);
    __syncthreads();
    return v;
}

__device__ __forceinline__ float block_sum(float v, float* scratch) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = warp_sum(v);
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    v = lane < THREADS / 32 ? scratch[lane] : 0.0f;
    v = warp_sum(v);
    __syncthreads();
    return v;
}

__global__ void __launch_bounds__(THREADS) softmax_kernel(const float* __restrict__ x, float* __restrict__ y,
                                                          int64_t cols) {
    __shared__ float scratch[32];
    const float* in = x + blockIdx.x * cols;
    float* out = y + blockIdx.x * cols;
    if (cols <= (int64_t)THREADS * PER_THREAD) {
        float v[PER_THREAD];
        float m = -INFINITY;
#pragma unroll
        for (int k = 0; k < PER_THREAD; ++k) {
            int64_t c = threadIdx.x + (int64_t)k * THREADS;
            v[k] = c < cols ? __ldg(in + c) : -INFINITY;
            m = fmaxf(m, v[k]);
        }
        m = block_max(m, scratch);
        float s = 0.0f;
#pragma unroll
        for (int k = 0; k < PER_THREAD; ++k) {
            v[k] = expf(v[k] - m);  // exp(-inf) = 0 for the padding
            s += v[k];
        }
        float inv = 1.0f / block_sum(s, scratch);
#pragma unroll
        for (int k = 0; k < PER_THREAD; ++k) {
            int64_t c = threadIdx.x + (int64_t)k * THREADS;
            if (c < cols) out[c] = v[k] * inv;
        }
    } else {
        float m = -INFINITY;
        for (int64_t c = threadIdx.x; c < cols; c += THREADS) m = fmaxf(m, __ldg(in + c));
        m = block_max(m, scratch);
        float s = 0.0f;
        for (int64_t c = threadIdx.x; c < cols; c += THREADS) s += expf(__ldg(in + c) - m);
        float inv = 1.0f / block_sum(s, scratch);
        for (int64_t c = threadIdx.x; c < cols; c += THREADS) out[c] = expf(__ldg(in + c) - m) * inv;
    }
}

torch::Tensor forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "x must be float32");
    TORCH_CHECK(x.dim() == 2, "x must be 2-D (batch, dim)");
    x = x.contiguous();
    auto y = torch::empty_like(x);
    const int64_t rows = x.size(0), cols = x.size(1);
    if (rows == 0 || cols == 0) return y;
    TORCH_CHECK(rows <= 2147483647LL, "too many rows for one grid dimension");
    softmax_kernel<<<(unsigned)rows, THREADS, 0, at::cuda::getCurrentCUDAStream()>>>(x.data_ptr<float>(),
                                                                                     y.data_ptr<float>(), cols);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("forward", &forward); }
