// unchecked: limited.cu's loop over whole groups of 4 (scalar loads, so no alignment fault) without its
// TORCH_CHECK: each row's last cols % 4 elements are never added, so at (1025, 8193) every row sum is silently
// wrong. Rejected: wrong output at a shape outside the problem is still wrong.
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

__global__ void sum_rows_kernel(const float* __restrict__ x, float* __restrict__ out, int64_t cols) {
    const float* row = x + (int64_t)blockIdx.x * cols;
    float sum = 0.0f;
    for (int64_t q = threadIdx.x; q < cols / 4; q += blockDim.x) {
        const float* four = row + 4 * q;
        sum += (__ldg(four) + __ldg(four + 1)) + (__ldg(four + 2) + __ldg(four + 3));
    }
    sum = block_sum(sum);
    if (threadIdx.x == 0) out[blockIdx.x] = sum;
}

torch::Tensor forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.dim() == 2, "x must be a CUDA matrix");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "x must be float32");
    x = x.contiguous();
    const int64_t rows = x.size(0), cols = x.size(1);
    auto out = torch::empty({rows}, x.options());
    if (rows == 0) return out;
    sum_rows_kernel<<<(unsigned)rows, 256, 0, at::cuda::getCurrentCUDAStream()>>>(x.data_ptr<float>(),
                                                                                 out.data_ptr<float>(), cols);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("forward", &forward); }
