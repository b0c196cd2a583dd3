#include <cuda_runtime.h>

__global__ void bitonicSortStep(float *values, int j, int k)
{
    unsigned int i = threadIdx.x + blockDim.x * blockIdx.x;
    unsigned int ixj = i ^ j;  // @hole midline=unsigned int ixj =
    if (ixj > i) {
        if ((i & k) == 0) {
            if (values[i] > values[ixj]) {
                float temp = values[i];
                values[i] = values[ixj];
                values[ixj] = temp;
            }
        } else {
            if (values[i] < values[ixj]) {
                float temp = values[i];  // @hole
                values[i] = values[ixj];
                values[ixj] = temp;
            }
        }
    }
}
