#include <cuda_runtime.h>

#define NSTREAMS 4

__global__ void process(float *d, int offset, int n)
{
    int i = offset + blockIdx.x * blockDim.x + threadIdx.x;
    if (i < offset + n) d[i] = d[i] * 2.0f + 1.0f;
}

void runStreams(float *h_data, float *d_data, int N)
{
    cudaStream_t streams[NSTREAMS];
    int chunk = N / NSTREAMS;
    for (int s = 0; s < NSTREAMS; ++s)
        cudaStreamCreate(&streams[s]);  // @hole
    for (int s = 0; s < NSTREAMS; ++s) {
        int offset = s * chunk;
        cudaMemcpyAsync(d_data + offset, h_data + offset, chunk * sizeof(float), cudaMemcpyHostToDevice, streams[s]);
        process<<<(chunk + 255) / 256, 256, 0, streams[s]>>>(d_data, offset, chunk);  // @hole midline=process<<<
        cudaMemcpyAsync(h_data + offset, d_data + offset, chunk * sizeof(float), cudaMemcpyDeviceToHost, streams[s]);
    }
    for (int s = 0; s < NSTREAMS; ++s) {
        cudaStreamSynchronize(streams[s]);
        cudaStreamDestroy(streams[s]);  // @hole
    }
}
