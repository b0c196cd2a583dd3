#include <cuda_runtime.h>

__global__ void jacobiStep(const float *u, float *unew, int nx, int ny)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int j = blockIdx.y * blockDim.y + threadIdx.y;
    if (i > 0 && i < nx - 1 && j > 0 && j < ny - 1) {  // @hole midline=if (i > 0 &&
        int c = j * nx + i;
        unew[c] = 0.25f * (u[c - 1] + u[c + 1] + u[c - nx] + u[c + nx]);  // @hole
    }
}

void jacobi(float *d_u, float *d_tmp, int nx, int ny, int iters)
{
    dim3 block(32, 8);
    dim3 grid((nx + block.x - 1) / block.x, (ny + block.y - 1) / block.y);
    for (int it = 0; it < iters; ++it) {
        jacobiStep<<<grid, block>>>(d_u, d_tmp, nx, ny);
        float *t = d_u;
        d_u = d_tmp;
        d_tmp = t;
    }
}
