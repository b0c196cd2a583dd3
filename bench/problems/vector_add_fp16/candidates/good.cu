// good: 16-byte loads and stores (8 halves, added as 4 __half2 pairs) where the buffers are aligned and the
// thread's 8 elements are all inside n; element by element otherwise (the tail).
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <stdint.h>

__global__ void vector_add_fp16(__half* c, const __half* a, const __half* b, int n) {
    int i = (blockIdx.x * blockDim.x + threadIdx.x) * 8;  // blockDim 256: a block covers 2048 elements
    uintptr_t bits = reinterpret_cast<uintptr_t>(a) | reinterpret_cast<uintptr_t>(b) | reinterpret_cast<uintptr_t>(c);
    if ((bits & 15) == 0 && i + 7 < n) {
        uint4 va = __ldg(reinterpret_cast<const uint4*>(a + i));
        uint4 vb = __ldg(reinterpret_cast<const uint4*>(b + i));
        const __half2* ha = reinterpret_cast<const __half2*>(&va);
        const __half2* hb = reinterpret_cast<const __half2*>(&vb);
        uint4 vc;
        __half2* hc = reinterpret_cast<__half2*>(&vc);
#pragma unroll
        for (int k = 0; k < 4; ++k) hc[k] = __hadd2(ha[k], hb[k]);
        *reinterpret_cast<uint4*>(c + i) = vc;
    } else {
        for (int k = i; k < n && k < i + 8; ++k) c[k] = __hadd(a[k], b[k]);
    }
}
