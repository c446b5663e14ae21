// scale_bias.cu: y = x * 2 + 1, one thread per element, with a bounds check.
//
// The thread layer of the programming model: the kernel body is ordinary scalar code, and each
// thread finds "its" element from the built-in coordinates,
//     i = blockIdx.x * blockDim.x + threadIdx.x.
// The grid is rounded up to whole blocks, so the last block usually has threads past the end of
// the array: the `if (i < n)` bounds check is what keeps them from touching memory that is not
// theirs. Nothing else is needed: no thread talks to another, so there is no synchronisation.
//
// Two entries:
//   scale_bias_scalar: the textbook form, one float per thread.
//     grid = ceil(n / blockDim.x).
//   scale_bias_vec4:   the same mapping with a float4 (16 bytes) as the "element". One 16-byte
//     load and store per thread keeps four times as many bytes in flight per thread as the
//     scalar form, which is what a streaming kernel needs to approach HBM bandwidth. Thread t
//     handles vector t for t < n/4; the n % 4 leftover floats (at most 3) go one each to the
//     next threads, t = n/4 .. n/4 + n%4 - 1, so every float is written exactly once.
//     grid = ceil((n/4 + n%4) / blockDim.x).
// Both assume x and y start 16-byte aligned (device allocations are 256-byte aligned).
// x * 2 is exact in float32, so y is the single correctly rounded x * 2 + 1 whether or not the
// compiler fuses it into an FMA: the result is bit-identical to numpy's float32 arithmetic.

#include <cstddef>

namespace {

__device__ __forceinline__ float scale_bias1(float v) { return v * 2.0f + 1.0f; }

}  // namespace

extern "C" __global__ void scale_bias_scalar(const float* __restrict__ x, float* __restrict__ y,
                                             int n) {
  // size_t: blockIdx.x * blockDim.x can exceed 2^31 for large grids even when n fits an int.
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < static_cast<size_t>(n)) y[i] = scale_bias1(x[i]);
}

extern "C" __global__ void scale_bias_vec4(const float* __restrict__ x, float* __restrict__ y,
                                           int n) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const size_t n4 = static_cast<size_t>(n) / 4;  // whole float4 vectors
  const size_t tail = static_cast<size_t>(n) % 4;  // leftover floats, 0..3
  if (i < n4) {
    float4 v = reinterpret_cast<const float4*>(x)[i];
    v.x = scale_bias1(v.x);
    v.y = scale_bias1(v.y);
    v.z = scale_bias1(v.z);
    v.w = scale_bias1(v.w);
    reinterpret_cast<float4*>(y)[i] = v;
  } else if (i < n4 + tail) {
    // The bounds check of the vector form: the last few floats, one per thread.
    const size_t j = n4 * 4 + (i - n4);
    y[j] = scale_bias1(x[j]);
  }
}
