// oob: the tiled transpose with its bounds checks dropped ("the sizes are multiples of 32"): at other sizes the
// edge tiles read past the end of in and write past the end of out (by up to 31 rows of out).
#include <cuda_runtime.h>

__global__ void transpose(float* out, const float* in, int rows, int cols) {
    __shared__ float tile[32][33];
    int r0 = blockIdx.y * 32, c0 = blockIdx.x * 32;
    int c = c0 + threadIdx.x;
    for (int j = 0; j < 32; j += 8) {
        int r = r0 + threadIdx.y + j;
        tile[threadIdx.y + j][threadIdx.x] = __ldg(in + (size_t)r * cols + c);
    }
    __syncthreads();
    int r = r0 + threadIdx.x;
    for (int j = 0; j < 32; j += 8) {
        int oc = c0 + threadIdx.y + j;
        out[(size_t)oc * rows + r] = tile[threadIdx.x][threadIdx.y + j];
    }
}
