#include <cuda_runtime.h>

__global__ void jacobiStep(const float *u, float *unew, int nx, int ny)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int j = blockIdx.y * blockDim.y + threadIdx.y;
    if (i > 0 && i < nx - 1 && j > 0 && j < ny - 1) {  // @hole midline=if (i > 0 &&
        int idx = j * nx + i;
        unew[idx] = 0.25f * (u[idx - 1] + u[idx + 1] + u[idx - nx] + u[idx + nx]);  // @hole midline=unew[idx] =
    }
}
