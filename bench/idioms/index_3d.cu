#include <cuda_runtime.h>

__global__ void scaleVolume(float *vol, float s, int nx, int ny, int nz)
{
    int ix = blockIdx.x * blockDim.x + threadIdx.x;
    int iy = blockIdx.y * blockDim.y + threadIdx.y;  // @hole
    int iz = blockIdx.z * blockDim.z + threadIdx.z;  // @hole midline=int iz =
    if (ix < nx && iy < ny && iz < nz) {
        vol[(iz * ny + iy) * nx + ix] *= s;
    }
}
