#include <cuda_runtime.h>

__global__ void transposeNaive(float *odata, const float *idata, int width, int height)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < width && y < height) {  // @hole midline=if (x < width
        odata[x * height + y] = idata[y * width + x];  // @hole
    }
}
