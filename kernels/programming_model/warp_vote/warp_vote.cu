// warp_vote.cu: per-group __all_sync, __any_sync and __ballot_sync (+ __popc) of x[i] > threshold.
//
// A vote evaluates one predicate per lane and gives every participating lane the combined answer
// in a single instruction, without shared memory:
//   __all_sync(mask, p)    non-zero iff p holds on every lane in mask,
//   __any_sync(mask, p)    non-zero iff p holds on at least one lane in mask,
//   __ballot_sync(mask, p) a 32-bit word whose bit l is p of lane l (0 for lanes not in mask),
// and __popc(ballot) counts the lanes that voted yes.
//
// Group g = elements [32g, 32g + 32); lane l of a warp votes for element 32g + l. Results for
// group g go to all_out[g], any_out[g] (0 or 1), ballot_out[g] and popc_out[g].
//
// Why one warp votes for kGroups = 8 consecutive groups instead of one: a single 4-byte load per
// thread puts only 2048 * 4 = 8 KB in flight per SM, far below the ~30 KB that Little's law asks
// for to cover DRAM latency at full HBM bandwidth; the kernel then runs at ~25% of the roofline.
// So warp w (of the grid) first issues ALL its loads, x[32g + l] for g = 8w .. 8w + 7 (eight
// independent coalesced 128-byte loads, 64 KB in flight per full SM), and only then votes group by
// group. Lane k keeps group 8w + k's answer and lanes 0..7 store the warp's 8 results with one
// 32-byte store per output array (8 times fewer store requests than lane 0 storing each group).
//
// Partial last group: lanes past n are EXCLUDED, not counted as "false". They sit that vote out
// and the others vote with mask = lanes 0..k-1 (k = n - 32g), so "all" means all of the group's
// real elements, and the ballot's bits k..31 are 0 because those lanes are not in the mask.
// (Padding them to vote false would make "all" false for every partial group.) Only the lanes in
// the mask execute the vote, as the *_sync contract requires. Groups wholly past n are skipped
// by the whole warp (a warp-uniform branch) and write nothing. Lane 0 is in every voting group,
// so the lane that stores a partial group's answers (lane k, maybe outside its mask) takes them
// from lane 0 with __shfl_sync once the warp has reconverged. Only the warp holding x's end needs
// any of this; every other warp has 8 whole groups and takes a lean full-mask branch, which keeps
// the instruction count low enough not to limit the memory stream.
//
// Launch: grid = ceil(n / (kThreads * kGroups)), block = kThreads (a multiple of 32).

namespace {

constexpr int kThreads = 256;
constexpr int kGroups = 8;  // consecutive 32-element groups per warp: the loads in flight
static_assert(kThreads % 32 == 0, "the block must be whole warps");
static_assert(kGroups <= 32, "lane k stores group k's results");

}  // namespace

extern "C" __global__ void __launch_bounds__(kThreads)
    warp_vote(const float* __restrict__ x, float threshold, int* __restrict__ all_out,
              int* __restrict__ any_out, unsigned* __restrict__ ballot_out,
              int* __restrict__ popc_out, int n) {
  // 32-bit indices: the largest, grid * kThreads * kGroups - 1 < 2^31 + 2048, fits in unsigned.
  const unsigned nu = static_cast<unsigned>(n);
  const unsigned lane = threadIdx.x % 32;
  const unsigned w = (blockIdx.x * blockDim.x + threadIdx.x) / 32;  // warp of the grid
  const unsigned g0 = w * kGroups;                                   // its first group
  const unsigned first = g0 * 32;                                    // its first element

  // 1. All loads first: independent registers, so the 8 requests are in flight together.
  //    A lane past n gets a dummy false; it will not be in the mask of that group's vote.
  bool pred[kGroups];
#pragma unroll
  for (int k = 0; k < kGroups; ++k) {
    const unsigned i = first + 32 * k + lane;
    pred[k] = i < nu && x[i] > threshold;
  }

  // 2. One vote per group that has elements; lane k keeps group g0 + k's answer.
  int my_all = 0, my_any = 0;
  unsigned my_ballot = 0;
  if (first + 32 * kGroups <= nu) {
    // Every warp but the one holding x's end: 8 whole groups, every lane votes in each of them.
#pragma unroll
    for (int k = 0; k < kGroups; ++k) {
      const int all = __all_sync(0xffffffffu, pred[k]);
      const int any = __any_sync(0xffffffffu, pred[k]);
      const unsigned ballot = __ballot_sync(0xffffffffu, pred[k]);
      if (lane == static_cast<unsigned>(k)) {
        my_all = all != 0;
        my_any = any != 0;
        my_ballot = ballot;
      }
    }
  } else {
    // The warp holding x's end: whole groups, at most one partial group, then groups past n.
#pragma unroll
    for (int k = 0; k < kGroups; ++k) {
      const unsigned first_k = first + 32 * k;
      if (first_k >= nu) break;  // warp-uniform: this group and all later ones are past n
      const unsigned active = nu - first_k;  // >= 1 in-range lanes
      const unsigned mask = active >= 32 ? 0xffffffffu : (1u << active) - 1u;
      int all = 0, any = 0;
      unsigned ballot = 0;
      if (lane < active) {  // exactly the lanes of mask take part in the votes
        all = __all_sync(mask, pred[k]);
        any = __any_sync(mask, pred[k]);
        ballot = __ballot_sync(mask, pred[k]);
      }
      // The whole warp is converged again here. Every voter holds the answer and lane 0 always
      // votes, but lane k may sit outside a partial group's mask: it takes lane 0's copy.
      const unsigned flags = __shfl_sync(0xffffffffu, (all != 0) | ((any != 0) << 1), 0);
      ballot = __shfl_sync(0xffffffffu, ballot, 0);
      if (lane == static_cast<unsigned>(k)) {
        my_all = flags & 1;
        my_any = flags >> 1;
        my_ballot = ballot;
      }
    }
  }

  // 3. Lanes 0..7 write the results of the groups that hold at least one element.
  const unsigned g = g0 + lane;
  if (lane < static_cast<unsigned>(kGroups) && g * 32 < nu) {
    all_out[g] = my_all;
    any_out[g] = my_any;
    ballot_out[g] = my_ballot;
    popc_out[g] = __popc(my_ballot);
  }
}
