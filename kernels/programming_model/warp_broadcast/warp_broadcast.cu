// warp_broadcast.cu: every lane of a warp receives lane 0's value through __shfl_sync.
//
// Group g = elements [32g, 32g + 32); lane l of a warp holds element 32g + l of each group it
// handles. Each lane loads its own x[i] into a register, then __shfl_sync(mask, v, 0) returns
// lane 0's register to every lane named in mask: out[i] = x[32 * (i / 32)]. No shared memory is
// involved; the exchange happens between registers.
//
// Why one warp handles kGroups = 8 consecutive groups instead of one: a single 4-byte load per
// thread puts only 2048 * 4 = 8 KB in flight per SM, far below the ~30 KB that Little's law asks
// for to cover DRAM latency at full HBM bandwidth, and the kernel ran at half the roofline. So
// warp w (of the grid) first issues all its loads, x[32g + l] for g = 8w .. 8w + 7, and only then
// shuffles group by group.
//
// The mask must name exactly the lanes that execute the shuffle, and the source lane must be
// one of them. When n is not a multiple of 32 the last group has lanes past the end of the array;
// the two entries handle them in the two ways the rule allows:
//
//   warp_broadcast_pad:  every lane executes every shuffle. Out-of-range lanes skip the load and
//     the store but still take part, so the full mask 0xffffffff is always correct.
//   warp_broadcast_mask: out-of-range lanes sit the shuffle out, and the others shuffle with a
//     mask of just the in-range lanes, lanes 0..k-1 with k = min(32, n - 32g). Lane 0 (the
//     source) is always among them: a group whose first element is past n is skipped by the
//     whole warp.
//
// Launch: grid = ceil(n / (kThreads * kGroups)), blockDim.x = kThreads (a multiple of 32).

#include <cstddef>

namespace {

constexpr int kThreads = 256;
constexpr int kGroups = 8;  // consecutive 32-element groups per warp: the loads in flight
constexpr unsigned kFullMask = 0xffffffffu;
static_assert(kThreads % 32 == 0, "the block must be whole warps");

// This thread's lane and the first element of its warp's first group.
__device__ __forceinline__ void place(size_t& lane, size_t& first) {
  lane = threadIdx.x % 32;
  first = (static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32 * kGroups * 32;
}

}  // namespace

extern "C" __global__ void __launch_bounds__(kThreads)
    warp_broadcast_pad(const float* __restrict__ x, float* __restrict__ out, int n) {
  size_t lane, first;
  place(lane, first);
  const size_t end = static_cast<size_t>(n);
  float v[kGroups];
#pragma unroll
  for (int k = 0; k < kGroups; ++k) {  // all loads first: 8 requests in flight together
    const size_t i = first + 32 * k + lane;
    v[k] = i < end ? x[i] : 0.0f;  // the padded lanes' value is never read
  }
#pragma unroll
  for (int k = 0; k < kGroups; ++k) v[k] = __shfl_sync(kFullMask, v[k], 0);
#pragma unroll
  for (int k = 0; k < kGroups; ++k) {
    const size_t i = first + 32 * k + lane;
    if (i < end) out[i] = v[k];
  }
}

extern "C" __global__ void __launch_bounds__(kThreads)
    warp_broadcast_mask(const float* __restrict__ x, float* __restrict__ out, int n) {
  size_t lane, first;
  place(lane, first);
  const size_t end = static_cast<size_t>(n);
  float v[kGroups];
#pragma unroll
  for (int k = 0; k < kGroups; ++k) {
    const size_t i = first + 32 * k + lane;
    if (i < end) v[k] = x[i];
  }
#pragma unroll
  for (int k = 0; k < kGroups; ++k) {
    const size_t group_first = first + 32 * k;  // element of this group's lane 0
    if (group_first >= end) break;  // the same for the whole warp: nobody is left to shuffle
    if (group_first + lane < end) {
      const size_t active = end - group_first;  // >= 1: lane 0 is in range
      const unsigned mask = active >= 32 ? kFullMask : (1u << active) - 1u;  // lanes 0..active-1
      out[group_first + lane] = __shfl_sync(mask, v[k], 0);
    }
  }
}
