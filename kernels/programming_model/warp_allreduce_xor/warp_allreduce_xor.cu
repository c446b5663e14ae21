// warp_allreduce_xor.cu: butterfly all-reduce with __shfl_xor_sync; every lane ends with the sum.
//
// Group g = elements [32g, 32g + 32); lane l of a warp holds element 32g + l of each group it
// reduces. Each step adds the value of the lane whose index differs in one bit (lane ^ offset,
// offset = 16, 8, 4, 2, 1). After j steps every lane holds the sum over the 2^j lanes that differ
// from it only in the bits visited so far; after five steps that group is the whole warp. Unlike
// a tree reduce to lane 0, no lane is left idle and every lane finishes with the total: an
// all-reduce, which is why out[i] is written by every lane and checked for every lane. (Both
// partners of a step compute a + b and b + a, which are the same float, so all 32 lanes hold
// bit-identical sums.)
//
// Why one warp reduces kGroups = 8 consecutive groups instead of one: with a single 4-byte load
// per thread an SM has only 2048 * 4 = 8 KB of loads in flight, far below the ~30 KB that Little's
// law asks for to cover DRAM latency at full HBM bandwidth, and the kernel ran at half the
// roofline. So warp w (of the grid) first issues all its loads, x[32g + l] for g = 8w .. 8w + 7
// (eight independent coalesced 128-byte loads), and only then runs the eight butterflies.
//
// Partial last group (n % 32 != 0): a xor partner of an in-range lane can be out of range (lane 2
// of a 3-lane group pairs with lane 18 at offset 16), so shrinking the mask to the in-range lanes
// would read lanes that do not take part, which is undefined. Instead every lane stays alive and
// runs all the full-mask shuffles; out-of-range lanes contribute 0, the identity of +, and only
// in-range lanes store.
//
// Launch: grid = ceil(n / (kThreads * kGroups)), blockDim.x = kThreads (a multiple of 32).

#include <cstddef>

namespace {

constexpr int kThreads = 256;
constexpr int kGroups = 8;  // consecutive 32-element groups per warp: the loads in flight
constexpr unsigned kFullMask = 0xffffffffu;
static_assert(kThreads % 32 == 0, "the block must be whole warps");

__device__ __forceinline__ float warp_allreduce_sum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(kFullMask, v, offset);
  return v;
}

}  // namespace

extern "C" __global__ void __launch_bounds__(kThreads)
    warp_allreduce_xor(const float* __restrict__ x, float* __restrict__ out, int n) {
  const size_t lane = threadIdx.x % 32;
  const size_t warp = (static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const size_t first = warp * kGroups * 32;  // this warp's first element
  const size_t end = static_cast<size_t>(n);

  // 1. All loads first: independent registers, so the 8 requests are in flight together.
  float v[kGroups];
#pragma unroll
  for (int k = 0; k < kGroups; ++k) {
    const size_t i = first + 32 * k + lane;
    v[k] = i < end ? x[i] : 0.0f;
  }
  // 2. One butterfly per group. No lane returns early: all 32 take part in every full-mask step.
#pragma unroll
  for (int k = 0; k < kGroups; ++k) v[k] = warp_allreduce_sum(v[k]);
#pragma unroll
  for (int k = 0; k < kGroups; ++k) {
    const size_t i = first + 32 * k + lane;
    if (i < end) out[i] = v[k];
  }
}
