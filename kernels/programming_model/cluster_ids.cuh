// cluster_ids.cuh: what cluster_static and cluster_dynamic_launch report, the same code in both.
// The two kernels differ only in where the cluster shape comes from (__cluster_dims__, or the
// launch attribute), so that difference is all their .cu files show.
//
// Every value written below comes from the hardware's special registers (%cluster_ctarank,
// %cluster_ctaid, %clusterid, %cluster_nctaid, ...) via cooperative groups, never from arithmetic
// on blockIdx, so the test checks the hardware's numbering against an independent formula.
//
// block_info: [GY][GX][kFields] int32, written by thread 0 of each block.
// thread_ranks: [GY * kBlockY][GX * kBlockX] int32, one per thread (row = global y).

#pragma once

#include <cooperative_groups.h>

#include <cstddef>

constexpr int kBlockX = 32;  // one warp per row: the per-thread store is fully coalesced
constexpr int kBlockY = 8;
constexpr int kFields = 10;

__device__ __forceinline__ void report_cluster_ids(int* __restrict__ block_info,
                                                   int* __restrict__ thread_ranks) {
  namespace cg = cooperative_groups;
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
    const dim3 shape = cluster.dim_blocks();  // read back from the hardware, however it was set
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
