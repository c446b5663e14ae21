// warp_vote.cu: per-warp __all_sync, __any_sync and __ballot_sync (+ __popc) of x[i] > threshold.
//
// A vote evaluates one predicate per lane and gives every participating lane the combined answer
// in a single instruction, without shared memory:
//   __all_sync(mask, p)    non-zero iff p holds on every lane in mask,
//   __any_sync(mask, p)    non-zero iff p holds on at least one lane in mask,
//   __ballot_sync(mask, p) a 32-bit word whose bit l is p of lane l (0 for lanes not in mask),
// and __popc(ballot) counts the lanes that voted yes.
//
// One thread per element, i = blockIdx.x * blockDim.x + threadIdx.x; with blockDim.x a multiple
// of 32, warp w of the grid holds elements [32w, 32w + 32) and lane l = i % 32. Lane 0 of warp w
// writes all_out[w], any_out[w] (0 or 1), ballot_out[w] and popc_out[w].
//
// Partial last warp: lanes past n are EXCLUDED, not counted as "false". They return at once and
// the others vote with mask = lanes 0..k-1 (k = n - 32w), so "all" means all of the warp's real
// elements, and the ballot's bits k..31 are 0 because those lanes are not in the mask. (Padding
// them to vote false would make "all" false for every partial warp.) Lane 0 is always in range.
//
// Launch: grid = ceil(n / blockDim.x), blockDim.x a multiple of 32 (kThreads = 256 here).

#include <cstddef>

namespace {

constexpr int kThreads = 256;

}  // namespace

extern "C" __global__ void __launch_bounds__(kThreads)
    warp_vote(const float* __restrict__ x, float threshold, int* __restrict__ all_out,
              int* __restrict__ any_out, unsigned* __restrict__ ballot_out,
              int* __restrict__ popc_out, int n) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= static_cast<size_t>(n)) return;
  const size_t warp = i / 32;
  const size_t active = static_cast<size_t>(n) - warp * 32;  // >= 1 in-range lanes
  const unsigned mask = active >= 32 ? 0xffffffffu : (1u << active) - 1u;

  const bool pred = x[i] > threshold;
  const int all = __all_sync(mask, pred);
  const int any = __any_sync(mask, pred);
  const unsigned ballot = __ballot_sync(mask, pred);

  if ((i & 31) == 0) {  // lane 0 speaks for the warp
    all_out[warp] = all != 0;
    any_out[warp] = any != 0;
    ballot_out[warp] = ballot;
    popc_out[warp] = __popc(ballot);
  }
}
