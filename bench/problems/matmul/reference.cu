// Matrix product C = A B: A is M x K, B is K x N, C is M x N, all row-major float32.
// The original: no shared memory; a 16x16 block covers a 64x64 tile of C and each thread computes 4x4 of its
// outputs (rows ty + 16 i, columns tx + 16 j), each as a plain dot product read straight from global memory.
#include <cuda_runtime.h>

/* dice:launch
kernel = "matmul"
sizes = { M = 2048, N = 2048, K = 2048 }
grid = ["cdiv(N, 64)", "cdiv(M, 64)"]
block = [16, 16]
args = [
  { name = "C", role = "out", dtype = "float32", shape = ["M", "N"] },
  { name = "A", role = "in", dtype = "float32", shape = ["M", "K"] },
  { name = "B", role = "in", dtype = "float32", shape = ["K", "N"] },
  { name = "M", role = "scalar", dtype = "int32", value = "M" },
  { name = "N", role = "scalar", dtype = "int32", value = "N" },
  { name = "K", role = "scalar", dtype = "int32", value = "K" },
]
*/
__global__ void matmul(float* C, const float* A, const float* B, int M, int N, int K) {
    for (int i = 0; i < 4; ++i) {
        int row = blockIdx.y * 64 + threadIdx.y + 16 * i;
        for (int j = 0; j < 4; ++j) {
            int col = blockIdx.x * 64 + threadIdx.x + 16 * j;
            if (row < M && col < N) {
                float acc = 0.0f;
                for (int k = 0; k < K; ++k) acc += A[(size_t)row * K + k] * B[(size_t)k * N + col];
                C[(size_t)row * N + col] = acc;
            }
        }
    }
}
