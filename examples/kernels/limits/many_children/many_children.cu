// A child grid per row, 20,000 rows: more device-side launches than the 2,048 the device runtime
// queues by default, so its spec asks the context for more (ContextLimits.pending_launches).
// Device-side launches need relocatable device code and cudadevrt in the device link.
__global__ void scale_row(const float* x, float* y, int cols) {
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j < cols) y[j] = 3.0f * x[j];
}

extern "C" __global__ void many_children(const float* x, float* y, int rows, int cols) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= rows) return;
    const size_t at = size_t(row) * cols;
    // Past the pending-launch limit a launch fails (cudaErrorLaunchPendingCountExceeded) and
    // its row stays unwritten: the poisoned output then fails the case.
    scale_row<<<(cols + 63) / 64, 64>>>(x + at, y + at, cols);
}
