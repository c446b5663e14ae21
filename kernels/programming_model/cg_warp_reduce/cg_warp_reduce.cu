// cg_warp_reduce.cu: per-group sums with cooperative groups, tiled_partition<32> + cg::reduce.
//
// Cooperative groups name the threads that cooperate as an object instead of a bare mask:
// cg::this_thread_block() is the block, cg::tiled_partition<32>(block) cuts it into tiles of 32
// consecutive threads (exactly the hardware warps), and cg::reduce(tile, v, cg::plus<float>())
// combines one value per thread of the tile. The tile carries its own member mask, so the code
// never spells 0xffffffff; underneath, the reduction is the same handful of register shuffles a
// hand-written __shfl_xor_sync loop would issue.
//
// Output: sums[g] = sum of group g = elements [32g, 32g + 32) (clipped to n), one per group.
//
// Why one tile handles kGroups = 8 consecutive groups instead of one: a single 4-byte load per
// thread puts only 2048 * 4 = 8 KB in flight per SM, far below the ~30 KB that Little's law asks
// for to cover DRAM latency at full HBM bandwidth; the kernel then runs at ~30% of the roofline.
// So each tile first issues ALL its loads (lane l of tile w loads x[32g + l] for the 8 groups
// g = 8w .. 8w + 7: eight independent coalesced 128-byte loads, 64 KB in flight per full SM), and
// only then runs one cg::reduce per group. Tile w = b * meta_group_size() + meta_group_rank() of
// the grid (meta_group_size() = tiles per block, meta_group_rank() = this tile's index).
// After the reductions lane k holds group 8w + k's sum, so lanes 0..7 store the tile's 8 sums
// with one 32-byte store.
//
// Partial last group: cg::reduce is collective over the whole tile, so every thread of the tile
// calls it for every group; none may skip it. Lanes past n contribute 0, the identity of +.
// Groups wholly past n (the tail of the last tile and block) reduce zeros and write nothing.
//
// Launch: grid = ceil(n / (kThreads * kGroups)), block = kThreads (a multiple of 32);
// sums has ceil(n / 32) elements.

#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>

namespace cg = cooperative_groups;

namespace {

constexpr int kThreads = 256;
constexpr int kGroups = 8;  // consecutive 32-element groups per tile: the loads in flight
static_assert(kThreads % 32 == 0, "the block must be whole tiles");
static_assert(kGroups <= 32, "lane k stores group k's sum");

}  // namespace

extern "C" __global__ void __launch_bounds__(kThreads)
    cg_warp_reduce(const float* __restrict__ x, float* __restrict__ sums, int n) {
  const cg::thread_block block = cg::this_thread_block();
  const cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);

  // 32-bit indices: the largest, grid * kThreads * kGroups - 1 < 2^31 + 2048, fits in unsigned.
  const unsigned nu = static_cast<unsigned>(n);
  const unsigned w = blockIdx.x * warp.meta_group_size() + warp.meta_group_rank();  // tile of grid
  const unsigned g0 = w * kGroups;  // its first group
  const unsigned lane = warp.thread_rank();

  // 1. All loads first: independent registers, so the 8 requests are in flight together.
  float v[kGroups];
#pragma unroll
  for (int k = 0; k < kGroups; ++k) {
    const unsigned i = (g0 + k) * 32 + lane;
    v[k] = i < nu ? x[i] : 0.0f;
  }

  // 2. One collective reduce per group; every lane of the tile calls each of them.
  float mine = 0.0f;
#pragma unroll
  for (int k = 0; k < kGroups; ++k) {
    const float sum = cg::reduce(warp, v[k], cg::plus<float>());
    if (lane == static_cast<unsigned>(k)) mine = sum;  // lane k keeps group g0 + k
  }

  // 3. Lanes 0..7 write the sums of the groups that hold at least one element.
  if (lane < static_cast<unsigned>(kGroups) && (g0 + lane) * 32 < nu) sums[g0 + lane] = mine;
}
