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
// For a launch-time cluster (CX, CY, 1) the values read back (../cluster_ids.cuh) must be:
//   block_rank   = (blockIdx.x % CX) + CX * (blockIdx.y % CY)   (x fastest inside the cluster)
//   cluster_index = (blockIdx.x / CX, blockIdx.y / CY), cluster_rank = cx + clusters_x * cy
//   thread_rank  = block_rank * threads_per_block + linear thread index in the block
//
// Launch: grid = (GX, GY, 1) blocks, multiples of the cluster shape, block = (kBlockX, kBlockY, 1).

#include "../cluster_ids.cuh"

extern "C" __global__ void __launch_bounds__(kBlockX * kBlockY)
    cluster_dynamic_launch(int* __restrict__ block_info, int* __restrict__ thread_ranks) {
  report_cluster_ids(block_info, thread_ranks);
}
