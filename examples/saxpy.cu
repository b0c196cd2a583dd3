// y = a * x + y, two ways. `dice-lsp bench examples/saxpy.cu` verifies saxpy_vec4 against saxpy and times both.
#include <cuda_runtime.h>

/* dice:launch
kernel = "saxpy"
sizes = { n = 33554432 }
grid = ["cdiv(n, 256)"]
block = [256]
args = [
  { name = "y", role = "inout", dtype = "float32", shape = ["n"] },
  { name = "x", role = "in", dtype = "float32", shape = ["n"] },
  { name = "a", role = "scalar", dtype = "float32", value = 2.5 },
  { name = "n", role = "scalar", dtype = "int32", value = "n" },
]
*/
__global__ void saxpy(float* y, const float* x, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}

/* dice:launch
kernel = "saxpy_vec4"
reference = "saxpy"
sizes = { n = 33554432 }
grid = ["cdiv(n, 1024)"]
block = [256]
args = [
  { name = "y", role = "inout", dtype = "float32", shape = ["n"] },
  { name = "x", role = "in", dtype = "float32", shape = ["n"] },
  { name = "a", role = "scalar", dtype = "float32", value = 2.5 },
  { name = "n", role = "scalar", dtype = "int32", value = "n" },
]
*/
__global__ void saxpy_vec4(float* y, const float* x, float a, int n) {
    int i = (blockIdx.x * blockDim.x + threadIdx.x) * 4;
    if (i + 3 < n && ((n & 3) == 0)) {
        float4 xv = *reinterpret_cast<const float4*>(x + i);
        float4 yv = *reinterpret_cast<float4*>(y + i);
        yv.x = a * xv.x + yv.x; yv.y = a * xv.y + yv.y; yv.z = a * xv.z + yv.z; yv.w = a * xv.w + yv.w;
        *reinterpret_cast<float4*>(y + i) = yv;
    } else {
        for (int j = i; j < n && j < i + 4; ++j) y[j] = a * x[j] + y[j];
    }
}
