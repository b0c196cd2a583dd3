// oob: the good kernel, but its scalar tail loop runs to n + 4096: it writes 16 KiB past the end of the output
// it allocated (memory no tensor of the harness owns), and every element of y is right.
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

__global__ void relu_scale_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n, float scale) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    const int64_t first = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    bool vec = ((reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(y)) & 15) == 0;
    int64_t done = 0;  // elements covered by the float4 loop
    if (vec) {
        const int64_t quads = n / 4;
        const float4* x4 = reinterpret_cast<const float4*>(x);
        float4* y4 = reinterpret_cast<float4*>(y);
        for (int64_t q = first; q < quads; q += stride) {
            float4 v = __ldg(x4 + q);
            y4[q] = make_float4(fmaxf(v.x, 0.0f) * scale, fmaxf(v.y, 0.0f) * scale, fmaxf(v.z, 0.0f) * scale,
                                fmaxf(v.w, 0.0f) * scale);
        }
        done = quads * 4;
    }
    // the tail runs 4096 elements too far: 16 KiB written past the end of y (and read past the end of x)
    for (int64_t i = done + first; i < n + 4096; i += stride) y[i] = fmaxf(__ldg(x + i), 0.0f) * scale;
}

torch::Tensor forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "x must be float32");
    TORCH_CHECK(x.dim() >= 1, "x must have a last dimension");
    x = x.contiguous();
    auto y = torch::empty_like(x);
    const int64_t n = x.numel();
    if (n == 0) return y;
    const float scale = (float)(1.0 / std::sqrt((double)x.size(-1)));
    const int threads = 256;
    const int64_t wanted = (n / 4 + threads - 1) / threads;
    const int blocks = (int)std::max<int64_t>(1, std::min<int64_t>(wanted, 132 * 32));
    relu_scale_kernel<<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(x.data_ptr<float>(),
                                                                               y.data_ptr<float>(), n, scale);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("forward", &forward); }
