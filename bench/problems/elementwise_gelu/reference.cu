// GELU, tanh approximation: y[i] = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), x = x[i].
// The original: scalar loads, powf and tanhf, four elements per thread (one block covers 1024).
#include <cuda_runtime.h>
#include <math.h>

/* dice:launch
kernel = "gelu"
sizes = { n = 67108864 }
grid = ["cdiv(n, 1024)"]
block = [256]
args = [
  { name = "y", role = "out", dtype = "float32", shape = ["n"] },
  { name = "x", role = "in", dtype = "float32", shape = ["n"] },
  { name = "n", role = "scalar", dtype = "int32", value = "n" },
]
*/
__global__ void gelu(float* y, const float* x, int n) {
    int base = blockIdx.x * 4 * blockDim.x + threadIdx.x;
    for (int k = 0; k < 4; ++k) {
        int i = base + k * blockDim.x;
        if (i < n) {
            float v = x[i];
            float u = 0.7978845608f * (v + 0.044715f * powf(v, 3.0f));
            y[i] = 0.5f * v * (1.0f + tanhf(u));
        }
    }
}
