// cg_warp_reduce.cu: per-warp sums with cooperative groups, tiled_partition<32> + cg::reduce.
//
// Cooperative groups name the threads that cooperate as an object instead of a bare mask:
// cg::this_thread_block() is the block, cg::tiled_partition<32>(block) cuts it into tiles of 32
// consecutive threads (exactly the hardware warps), and cg::reduce(tile, v, cg::plus<float>())
// combines one value per thread of the tile. The tile carries its own member mask, so the code
// never spells 0xffffffff; underneath, the reduction is the same handful of register shuffles a
// hand-written __shfl_xor_sync loop would issue.
//
// One thread per element, i = blockIdx.x * blockDim.x + threadIdx.x. Tile t of block b is warp
// w = b * meta_group_size() + t of the grid (meta_group_size() = tiles per block,
// meta_group_rank() = this tile's index), covering elements [32w, 32w + 32), since blockDim.x
// is a multiple of 32. Rank 0 of each tile writes sums[w].
//
// Partial last warp: cg::reduce is collective over the whole tile, so every thread of the tile
// must call it; none may return early. Threads past n contribute 0, the identity of +.
// Warps wholly past n (the tail of the last block) reduce zeros and write nothing.
//
// Launch: grid = ceil(n / blockDim.x), blockDim.x a multiple of 32 (kThreads = 256 here);
// sums has ceil(n / 32) elements.

#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
#include <cstddef>

namespace cg = cooperative_groups;

namespace {

constexpr int kThreads = 256;

}  // namespace

extern "C" __global__ void __launch_bounds__(kThreads)
    cg_warp_reduce(const float* __restrict__ x, float* __restrict__ sums, int n) {
  const cg::thread_block block = cg::this_thread_block();
  const cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);

  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const float v = i < static_cast<size_t>(n) ? x[i] : 0.0f;
  const float sum = cg::reduce(warp, v, cg::plus<float>());  // every lane of the tile calls it

  const size_t w =
      static_cast<size_t>(blockIdx.x) * warp.meta_group_size() + warp.meta_group_rank();
  if (warp.thread_rank() == 0 && w * 32 < static_cast<size_t>(n)) sums[w] = sum;
}
