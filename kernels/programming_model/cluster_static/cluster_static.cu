// cluster_static.cu: a 2x2 thread block cluster compiled into the kernel; every block reports
// where the hardware placed it.
//
// A cluster (sm_90+) groups neighbouring blocks of the grid; the hardware co-schedules them on
// SMs of one GPC so they can share a barrier and each other's shared memory. Here the shape is
// fixed at compile time with __cluster_dims__(2, 2, 1): the host launches an ordinary grid (it
// passes no cluster attribute) whose x and y block counts must be multiples of 2.
//
// Every value written below comes from the hardware's special registers (%cluster_ctarank,
// %cluster_ctaid, %clusterid, ...) via cooperative groups, never from arithmetic on blockIdx,
// so the test checks the hardware's numbering against an independent formula:
//   block_rank   = (blockIdx.x % 2) + 2 * (blockIdx.y % 2)   (x fastest inside the cluster)
//   cluster_index = (blockIdx.x / 2, blockIdx.y / 2), cluster_rank = cx + clusters_x * cy
//   thread_rank  = block_rank * threads_per_block + linear thread index in the block
//
// Launch: grid = (GX, GY, 1) blocks with GX, GY even, block = (kBlockX, kBlockY, 1).
// block_info: [GY][GX][kFields] int32, written by thread 0 of each block.
// thread_ranks: [GY * kBlockY][GX * kBlockX] int32, one per thread (row = global y).

#include <cooperative_groups.h>

namespace cg = cooperative_groups;

namespace {

constexpr int kBlockX = 32;  // one warp per row: the per-thread store is fully coalesced
constexpr int kBlockY = 8;
constexpr int kFields = 10;

}  // namespace

extern "C" __global__ void __cluster_dims__(2, 2, 1) __launch_bounds__(kBlockX * kBlockY)
    cluster_static(int* __restrict__ block_info, int* __restrict__ thread_ranks) {
  const cg::cluster_group cluster = cg::this_cluster();
  using grid = cg::grid_group;  // static id queries only: no grid object, no cooperative launch

  // Per-thread: the thread's rank among all threads of its cluster.
  const size_t row = static_cast<size_t>(blockIdx.y) * kBlockY + threadIdx.y;
  const size_t col = static_cast<size_t>(blockIdx.x) * kBlockX + threadIdx.x;
  const size_t width = static_cast<size_t>(gridDim.x) * kBlockX;
  thread_ranks[row * width + col] = static_cast<int>(cluster.thread_rank());

  if (threadIdx.x == 0 && threadIdx.y == 0) {
    const dim3 in_cluster = cluster.block_index();  // this block's (x, y, z) inside the cluster
    const dim3 cluster_idx = grid::cluster_index();  // which cluster of the grid, (x, y, z)
    const dim3 shape = cluster.dim_blocks();        // (2, 2, 1), read back from the hardware
    int* out = block_info + (static_cast<size_t>(blockIdx.y) * gridDim.x + blockIdx.x) * kFields;
    out[0] = static_cast<int>(cluster.block_rank());
    out[1] = static_cast<int>(in_cluster.x);
    out[2] = static_cast<int>(in_cluster.y);
    out[3] = static_cast<int>(cluster_idx.x);
    out[4] = static_cast<int>(cluster_idx.y);
    out[5] = static_cast<int>(grid::cluster_rank());
    out[6] = static_cast<int>(shape.x);
    out[7] = static_cast<int>(shape.y);
    out[8] = static_cast<int>(cluster.num_blocks());
    out[9] = static_cast<int>(grid::num_clusters());
  }
}
