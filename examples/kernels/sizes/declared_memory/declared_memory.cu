// y = a * x over a count that may be far past 2^31: the case's memory is declared up front.
extern "C" __global__ void declared_memory(const float* __restrict__ x, float* __restrict__ y,
                                           float a, long long n) {
    const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
    for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
         i += stride) {
        y[i] = a * x[i];
    }
}
