// y = x + 1, and each block's first thread says which rows it covered: device printf, which the
// harness catches into the case's output (bounded) instead of the run's console.
#include <cstdio>

extern "C" __global__ void device_printf(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (threadIdx.x == 0 && blockIdx.x < 4) {
        printf("block %d covers elements %d to %d\n", blockIdx.x, i, min(i + blockDim.x, n) - 1);
    }
    if (i < n) y[i] = x[i] + 1.0f;
}
