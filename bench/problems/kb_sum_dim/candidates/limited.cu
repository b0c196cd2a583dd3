// limited: float4 loads only, so it refuses rows that are not a multiple of 4 floats long with a TORCH_CHECK
// ("cols must be a multiple of 4"); right at every shape it accepts. Verified on the problem's shape and at
// (1025, 16384), with the refused (1025, 8193) reported as a limitation.
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cuda_runtime.h>
#include <stdint.h>

__device__ float block_sum(float value) {
    __shared__ float warp_sums[32];
    for (int offset = 16; offset > 0; offset >>= 1) value += __shfl_xor_sync(0xffffffffu, value, offset);
    if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x >> 5] = value;
    __syncthreads();
    float total = 0.0f;
    if (threadIdx.x < 32) {
        total = threadIdx.x < (blockDim.x >> 5) ? warp_sums[threadIdx.x] : 0.0f;
        for (int offset = 16; offset > 0; offset >>= 1) total += __shfl_xor_sync(0xffffffffu, total, offset);
    }
    return total;  // thread 0 holds the block's sum
}

__global__ void sum_rows_kernel(const float4* __restrict__ x, float* __restrict__ out, int64_t quads) {
    const float4* row = x + (int64_t)blockIdx.x * quads;
    float sum = 0.0f;
    for (int64_t q = threadIdx.x; q < quads; q += blockDim.x) {
        const float4 v = __ldg(row + q);
        sum += (v.x + v.y) + (v.z + v.w);
    }
    sum = block_sum(sum);
    if (threadIdx.x == 0) out[blockIdx.x] = sum;
}

torch::Tensor forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.dim() == 2, "x must be a CUDA matrix");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "x must be float32");
    TORCH_CHECK(x.size(1) % 4 == 0, "cols must be a multiple of 4");
    x = x.contiguous();
    TORCH_CHECK((reinterpret_cast<uintptr_t>(x.data_ptr()) & 15) == 0, "x must be 16-byte aligned");
    const int64_t rows = x.size(0), quads = x.size(1) / 4;
    auto out = torch::empty({rows}, x.options());
    if (rows == 0) return out;
    sum_rows_kernel<<<(unsigned)rows, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        reinterpret_cast<const float4*>(x.data_ptr<float>()), out.data_ptr<float>(), quads);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("forward", &forward); }
