// zero_inputs: a correct tiled transpose that, once its tile is in shared memory, zeroes that tile of in
// (const cast away; no other block reads it), so in is all zeros afterwards.
#include <cuda_runtime.h>

__global__ void transpose(float* out, const float* in, int rows, int cols) {
    __shared__ float tile[32][33];
    float* scratch = const_cast<float*>(in);
    int r0 = blockIdx.y * 32, c0 = blockIdx.x * 32;
    int c = c0 + threadIdx.x;
    for (int j = 0; j < 32; j += 8) {
        int r = r0 + threadIdx.y + j;
        if (r < rows && c < cols) tile[threadIdx.y + j][threadIdx.x] = in[(size_t)r * cols + c];
    }
    __syncthreads();
    for (int j = 0; j < 32; j += 8) {
        int r = r0 + threadIdx.y + j;
        if (r < rows && c < cols) scratch[(size_t)r * cols + c] = 0.0f;
    }
    int r = r0 + threadIdx.x;
    for (int j = 0; j < 32; j += 8) {
        int oc = c0 + threadIdx.y + j;
        if (oc < cols && r < rows) out[(size_t)oc * rows + r] = tile[threadIdx.x][threadIdx.y + j];
    }
}
