#include <cuda_runtime.h>

#define MASK_WIDTH 5

__constant__ float M[MASK_WIDTH];

__global__ void convolution1D(const float *N, float *P, int width)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float pValue = 0;
    int start = i - MASK_WIDTH / 2;
    for (int j = 0; j < MASK_WIDTH; j++) {
        if (start + j >= 0 && start + j < width) {  // @hole
            pValue += N[start + j] * M[j];  // @hole midline=pValue +=
        }
    }
    if (i < width) P[i] = pValue;
}

void setMask(const float *h_mask)
{
    cudaMemcpyToSymbol(M, h_mask, MASK_WIDTH * sizeof(float));
}
