#include <cuda_runtime.h>

__global__ void transposeNaive(float *odata, const float *idata, int width, int height)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < width && y < height)  // @hole
        odata[x * height + y] = idata[y * width + x];  // @hole midline=odata[x * height + y] =
}

void transpose(float *d_out, const float *d_in, int width, int height)
{
    dim3 block(16, 16);
    dim3 grid((width + block.x - 1) / block.x, (height + block.y - 1) / block.y);  // @hole midline=dim3 grid(
    transposeNaive<<<grid, block>>>(d_out, d_in, width, height);
}
