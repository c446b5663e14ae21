// cluster_dynamic_launch.cu: the same report as cluster_static.cu, but the cluster shape is
// chosen by the host at launch time; every block reports where the hardware placed it.
//
// The kernel carries no __cluster_dims__. The host launches it with cuLaunchKernelEx and the
// CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION attribute (cudaLaunchKernelEx in the runtime API), so
// one binary serves clusters of 2x1, 4x1, 2x2, ... blocks. Nothing in the code depends on the
// shape: cooperative groups read it back from the hardware (%cluster_nctaid). Clusters above 8
// blocks are "non-portable": the host must opt in with
// CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, and only some GPUs (H100/H200: up to 16)
// can place them.
//
// For a launch-time cluster (CX, CY, 1) the values read back must be:
//   block_rank   = (blockIdx.x % CX) + CX * (blockIdx.y % CY)   (x fastest inside the cluster)
//   cluster_index = (blockIdx.x / CX, blockIdx.y / CY), cluster_rank = cx + clusters_x * cy
//   thread_rank  = block_rank * threads_per_block + linear thread index in the block
//
// Launch: grid = (GX, GY, 1) blocks, multiples of the cluster shape, block = (kBlockX, kBlockY, 1).
// block_info: [GY][GX][kFields] int32, written by thread 0 of each block.
// thread_ranks: [GY * kBlockY][GX * kBlockX] int32, one per thread (row = global y).

#include <cooperative_groups.h>

namespace cg = cooperative_groups;

namespace {

constexpr int kBlockX = 32;  // one warp per row: the per-thread store is fully coalesced
constexpr int kBlockY = 8;
constexpr int kFields = 10;

}  // namespace

extern "C" __global__ void __launch_bounds__(kBlockX * kBlockY)
    cluster_dynamic_launch(int* __restrict__ block_info, int* __restrict__ thread_ranks) {
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
    const dim3 shape = cluster.dim_blocks();        // the shape the host chose at launch
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
