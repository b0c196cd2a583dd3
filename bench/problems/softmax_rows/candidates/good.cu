// good: the whole block works on its row: a parallel max and a parallel sum (warp shuffles, then one
// shared-memory step), float4 loads where the row is 16-byte aligned; the row is re-read from L1/L2, not DRAM.
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

__device__ __forceinline__ float warp_max(float v) {
    for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
    return v;
}

__device__ __forceinline__ float warp_sum(float v) {
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
    return v;
}

// Block-wide max / sum, returned to every thread (blockDim.x a multiple of 32). `scratch` holds 32 floats; the
// barrier at the end lets the caller reuse it.
__device__ __forceinline__ float block_max(float v, float* scratch) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    v = warp_max(v);
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    v = lane < warps ? scratch[lane] : -INFINITY;
    v = warp_max(v);
    __syncthreads();
    return v;
}

__device__ __forceinline__ float block_sum(float v, float* scratch) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    v = warp_sum(v);
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    v = lane < warps ? scratch[lane] : 0.0f;
    v = warp_sum(v);
    __syncthreads();
    return v;
}

__global__ void softmax_rows(float* out, const float* x, int rows, int cols) {
    __shared__ float scratch[32];
    int r = blockIdx.x;
    if (r >= rows) return;  // uniform over the block
    const float* in = x + (size_t)r * cols;
    float* o = out + (size_t)r * cols;
    bool vec = (cols & 3) == 0 && ((reinterpret_cast<uintptr_t>(in) | reinterpret_cast<uintptr_t>(o)) & 15) == 0;
    int quads = cols >> 2;

    float m = -INFINITY;
    if (vec) {
        for (int q = threadIdx.x; q < quads; q += blockDim.x) {
            float4 v = __ldg(reinterpret_cast<const float4*>(in) + q);
            m = fmaxf(m, fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w)));
        }
    } else {
        for (int c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, __ldg(in + c));
    }
    m = block_max(m, scratch);

    float s = 0.0f;
    if (vec) {
        for (int q = threadIdx.x; q < quads; q += blockDim.x) {
            float4 v = __ldg(reinterpret_cast<const float4*>(in) + q);
            s += (expf(v.x - m) + expf(v.y - m)) + (expf(v.z - m) + expf(v.w - m));
        }
    } else {
        for (int c = threadIdx.x; c < cols; c += blockDim.x) s += expf(__ldg(in + c) - m);
    }
    s = block_sum(s, scratch);
    float inv = 1.0f / s;

    if (vec) {
        for (int q = threadIdx.x; q < quads; q += blockDim.x) {
            float4 v = __ldg(reinterpret_cast<const float4*>(in) + q);
            float4 e = make_float4(expf(v.x - m) * inv, expf(v.y - m) * inv, expf(v.z - m) * inv, expf(v.w - m) * inv);
            reinterpret_cast<float4*>(o)[q] = e;
        }
    } else {
        for (int c = threadIdx.x; c < cols; c += blockDim.x) o[c] = expf(__ldg(in + c) - m) * inv;
    }
}
