// good: the 32x32 tile goes through shared memory (padded to 33 columns: no bank conflicts), so both the reads
// of in and the writes of out are coalesced.
#include <cuda_runtime.h>

__global__ void transpose(float* out, const float* in, int rows, int cols) {
    __shared__ float tile[32][33];
    int r0 = blockIdx.y * 32, c0 = blockIdx.x * 32;
    int c = c0 + threadIdx.x;
    for (int j = 0; j < 32; j += 8) {
        int r = r0 + threadIdx.y + j;
        if (r < rows && c < cols) tile[threadIdx.y + j][threadIdx.x] = __ldg(in + (size_t)r * cols + c);
    }
    __syncthreads();
    int r = r0 + threadIdx.x;  // a column of out is a row of in
    for (int j = 0; j < 32; j += 8) {
        int oc = c0 + threadIdx.y + j;  // a row of out is a column of in
        if (oc < cols && r < rows) out[(size_t)oc * rows + r] = tile[threadIdx.x][threadIdx.y + j];
    }
}
