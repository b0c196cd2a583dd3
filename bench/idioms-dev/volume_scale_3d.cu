#include <cuda_runtime.h>

__global__ void scaleVolume(float *vol, float s, int nx, int ny, int nz)
{
    int ix = blockIdx.x * blockDim.x + threadIdx.x;
    int iy = blockIdx.y * blockDim.y + threadIdx.y;
    int iz = blockIdx.z * blockDim.z + threadIdx.z;  // @hole
    if (ix < nx && iy < ny && iz < nz) {  // @hole midline=if (ix < nx &&
        size_t idx = ((size_t)iz * ny + iy) * nx + ix;  // @hole
        vol[idx] *= s;
    }
}

void launchScaleVolume(float *d_vol, float s, int nx, int ny, int nz)
{
    dim3 threads(8, 8, 8);
    dim3 blocks((nx + 7) / 8, (ny + 7) / 8, (nz + 7) / 8);
    scaleVolume<<<blocks, threads>>>(d_vol, s, nx, ny, nz);
}
