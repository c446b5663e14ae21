// cluster_static.cu: a 2x2 thread block cluster compiled into the kernel; every block reports
// where the hardware placed it.
//
// A cluster (sm_90+) groups neighbouring blocks of the grid; the hardware co-schedules them on
// SMs of one GPC so they can share a barrier and each other's shared memory. Here the shape is
// fixed at compile time with __cluster_dims__(2, 2, 1): the host launches an ordinary grid (it
// passes no cluster attribute) whose x and y block counts must be multiples of 2.
//
// Every value comes from the hardware (../cluster_ids.cuh, shared with cluster_dynamic_launch,
// says how), so the test checks the hardware's numbering against an independent formula:
//   block_rank   = (blockIdx.x % 2) + 2 * (blockIdx.y % 2)   (x fastest inside the cluster)
//   cluster_index = (blockIdx.x / 2, blockIdx.y / 2), cluster_rank = cx + clusters_x * cy
//   thread_rank  = block_rank * threads_per_block + linear thread index in the block
//
// Launch: grid = (GX, GY, 1) blocks with GX, GY even, block = (kBlockX, kBlockY, 1).

#include "../cluster_ids.cuh"

extern "C" __global__ void __cluster_dims__(2, 2, 1) __launch_bounds__(kBlockX * kBlockY)
    cluster_static(int* __restrict__ block_info, int* __restrict__ thread_ranks) {
  report_cluster_ids(block_info, thread_ranks);
}
