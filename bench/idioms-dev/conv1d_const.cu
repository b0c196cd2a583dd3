#include <cuda_runtime.h>

#define MAX_MASK 64

__constant__ float d_mask[MAX_MASK];

__global__ void convolution1D(const float *N, float *P, int maskWidth, int width)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float pvalue = 0.0f;
    int start = i - maskWidth / 2;  // @hole
    for (int j = 0; j < maskWidth; j++) {
        if (start + j >= 0 && start + j < width)  // @hole
            pvalue += N[start + j] * d_mask[j];  // @hole midline=pvalue +=
    }
    if (i < width) P[i] = pvalue;
}

void setMask(const float *h_mask, int maskWidth)
{
    cudaMemcpyToSymbol(d_mask, h_mask, maskWidth * sizeof(float));
}
