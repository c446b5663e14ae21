// warp_broadcast.cu: every lane of a warp receives lane 0's value through __shfl_sync.
//
// One thread per element, i = blockIdx.x * blockDim.x + threadIdx.x; with blockDim.x a multiple
// of 32, warp w of the grid holds elements [32w, 32w + 32) and lane l holds element 32w + l.
// Each lane loads its own x[i] into a register, then __shfl_sync(mask, v, 0) returns lane 0's
// register to every lane named in mask: out[i] = x[32 * (i / 32)]. No shared memory is involved;
// the exchange happens between registers.
//
// The mask must name exactly the lanes that execute the shuffle, and the source lane must be
// one of them. When n is not a multiple of 32 the last warp has lanes past the end of the array;
// the two entries handle them in the two ways the rule allows:
//
//   warp_broadcast_pad:  no thread leaves early. Out-of-range lanes skip the load and the store
//     but still execute the shuffle, so the full mask 0xffffffff is always correct.
//   warp_broadcast_mask: out-of-range threads return at once, and the survivors shuffle with a
//     mask of just the in-range lanes, lanes 0..k-1 with k = min(32, n - 32w). Lane 0 (the
//     source) is always among them: a warp whose first element is past n has no survivors.
//
// Launch: grid = ceil(n / blockDim.x), blockDim.x a multiple of 32 (kThreads = 256 here).

#include <cstddef>

namespace {

constexpr int kThreads = 256;
constexpr unsigned kFullMask = 0xffffffffu;

}  // namespace

extern "C" __global__ void __launch_bounds__(kThreads)
    warp_broadcast_pad(const float* __restrict__ x, float* __restrict__ out, int n) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const bool in_range = i < static_cast<size_t>(n);
  const float v = in_range ? x[i] : 0.0f;  // the padded lanes' value is never read
  const float from_lane0 = __shfl_sync(kFullMask, v, 0);
  if (in_range) out[i] = from_lane0;
}

extern "C" __global__ void __launch_bounds__(kThreads)
    warp_broadcast_mask(const float* __restrict__ x, float* __restrict__ out, int n) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= static_cast<size_t>(n)) return;
  const size_t warp_first = i & ~static_cast<size_t>(31);  // element of this warp's lane 0
  const size_t active = static_cast<size_t>(n) - warp_first;  // >= 1: lane 0 is in range
  const unsigned mask = active >= 32 ? kFullMask : (1u << active) - 1u;  // lanes 0..active-1
  out[i] = __shfl_sync(mask, x[i], 0);
}
