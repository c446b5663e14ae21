// Every byte of a buffer longer than 2^31 incremented: the count and every index are 64-bit.
#include <cstdint>

extern "C" __global__ void add_one_int64(const uint8_t* __restrict__ x, uint8_t* __restrict__ y,
                                         long long n) {
    // Widen before multiplying: blockIdx.x * blockDim.x is an unsigned 32-bit product, which
    // wraps past 2^32 and, stored in an int, goes negative past 2^31.
    const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
    for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
         i += stride) {
        y[i] = static_cast<uint8_t>(x[i] + 1);
    }
}
