#include <cuda_runtime.h>

__global__ void scale(float *data, float alpha, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {  // @hole
        data[i] *= alpha;  // @hole midline=data[i] *=
    }
}

void scale_on_device(float *d_data, float alpha, int n)
{
    int numSMs;
    cudaDeviceGetAttribute(&numSMs, cudaDevAttrMultiProcessorCount, 0);
    scale<<<32 * numSMs, 256>>>(d_data, alpha, n);
}
