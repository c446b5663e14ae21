// warp_allreduce_xor.cu: butterfly all-reduce with __shfl_xor_sync; every lane ends with the sum.
//
// One thread per element, i = blockIdx.x * blockDim.x + threadIdx.x; with blockDim.x a multiple
// of 32, warp w of the grid holds elements [32w, 32w + 32). Each step adds the value of the lane
// whose index differs in one bit (lane ^ offset, offset = 16, 8, 4, 2, 1). After j steps every
// lane holds the sum over the 2^j lanes that differ from it only in the bits visited so far;
// after five steps that group is the whole warp. Unlike a tree reduce to lane 0, no lane is left idle and
// every lane finishes with the total: an all-reduce, which is why out[i] is written by every
// lane and checked for every lane. (Both partners of a step compute a + b and b + a, which are
// the same float, so all 32 lanes hold bit-identical sums.)
//
// Partial last warp (n % 32 != 0): a xor partner of an in-range lane can be out of range (lane 2
// of a 3-lane warp pairs with lane 18 at offset 16), so shrinking the mask to the in-range lanes
// would read lanes that do not take part, which is undefined. Instead every lane stays alive and
// runs all five full-mask shuffles; out-of-range lanes contribute 0, the identity of +, and
// only in-range lanes store.
//
// Launch: grid = ceil(n / blockDim.x), blockDim.x a multiple of 32 (kThreads = 256 here).

#include <cstddef>

namespace {

constexpr int kThreads = 256;
constexpr unsigned kFullMask = 0xffffffffu;

__device__ __forceinline__ float warp_allreduce_sum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(kFullMask, v, offset);
  return v;
}

}  // namespace

extern "C" __global__ void __launch_bounds__(kThreads)
    warp_allreduce_xor(const float* __restrict__ x, float* __restrict__ out, int n) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const bool in_range = i < static_cast<size_t>(n);
  // No early return before the shuffles: all 32 lanes must execute them (full mask).
  const float sum = warp_allreduce_sum(in_range ? x[i] : 0.0f);
  if (in_range) out[i] = sum;
}
