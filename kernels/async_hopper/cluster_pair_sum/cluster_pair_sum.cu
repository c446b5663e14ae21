// cluster_pair_sum.cu: clusters of two blocks; block 0 adds block 1's partial through DSMEM.
//
// A thread block cluster (sm_90+) is a group of blocks that the hardware schedules at the same
// time on SMs of one GPC. Its blocks can synchronise with each other (cluster.sync()) and read
// or write each other's shared memory: distributed shared memory (DSMEM).
//
// Cluster c covers x[2c*chunk, min(2c*chunk + 2*chunk, n)). Its block of rank r reduces the
// slice starting at (2c + r) * chunk (up to chunk elements, possibly none at the tail) into a
// float in its own shared memory. After cluster.sync(), rank 0 maps rank 1's partial into its
// own address space with map_shared_rank(), adds it and writes sums[c]. Every block also writes
// its hardware cluster rank to ranks[blockIdx.x], so the test checks the rank numbering too.
//
// The cluster shape is fixed at compile time with __cluster_dims__(2, 1, 1), so the host launches
// it like an ordinary kernel (no cluster attribute). grid.x counts blocks and must be even:
// grid = (2 * ceil(n / (2 * chunk)), 1, 1), block = (kThreads, 1, 1), no dynamic shared memory.
// chunk must be a multiple of 4 so every block's slice starts 16-byte aligned (float4 loads).

#include <cooperative_groups.h>
#include <cstddef>

namespace cg = cooperative_groups;

namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

}  // namespace

extern "C" __global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(kThreads)
    cluster_pair_sum(const float* __restrict__ x, float* __restrict__ sums,
                     int* __restrict__ ranks, int n, int chunk) {
  __shared__ float warp_partials[kWarps];
  __shared__ float block_partial;  // the value the peer block reads through DSMEM

  cg::cluster_group cluster = cg::this_cluster();
  const unsigned rank = cluster.block_rank();  // 0 or 1 within this cluster
  const unsigned cluster_id = blockIdx.x / cluster.num_blocks();  // 1-D grid, 1-D clusters

  // This block's slice, clamped to n; at the tail it may be short or empty.
  const size_t begin = (static_cast<size_t>(cluster_id) * 2 + rank) * static_cast<size_t>(chunk);
  const size_t end_full = begin + static_cast<size_t>(chunk);
  const size_t end = end_full < static_cast<size_t>(n) ? end_full : static_cast<size_t>(n);
  const size_t count = begin < end ? end - begin : 0;

  // Vectorised main part: 16-byte loads, four independent running sums per thread.
  const float4* x4 = reinterpret_cast<const float4*>(x + begin);
  const size_t count4 = count / 4;
  float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll 4
  for (size_t i = threadIdx.x; i < count4; i += kThreads) {
    const float4 v = x4[i];
    acc.x += v.x;
    acc.y += v.y;
    acc.z += v.z;
    acc.w += v.w;
  }
  float v = (acc.x + acc.y) + (acc.z + acc.w);
  // Scalar tail: at most three elements, only in the last non-empty block.
  for (size_t i = count4 * 4 + threadIdx.x; i < count; i += kThreads) v += x[begin + i];

  // Block reduction: shuffles within each warp, then warp 0 folds the per-warp sums.
  v = warp_sum(v);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) warp_partials[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float w = lane < kWarps ? warp_partials[lane] : 0.f;
    w = warp_sum(w);
    if (lane == 0) block_partial = w;
  }
  if (threadIdx.x == 0) ranks[blockIdx.x] = static_cast<int>(rank);

  // First cluster barrier: both blocks have written block_partial, and cluster.sync() has
  // release/acquire semantics across the cluster, so rank 0 is guaranteed to read rank 1's
  // value. It also guarantees the peer block is running before its shared memory is touched.
  cluster.sync();

  if (rank == 0 && threadIdx.x == 0) {
    const float* peer = cluster.map_shared_rank(&block_partial, 1);  // rank 1's block_partial
    sums[cluster_id] = block_partial + *peer;
  }

  // Second cluster barrier: a block's shared memory is released when the block exits. Without
  // this barrier rank 1 could finish first and rank 0's DSMEM read would hit freed memory.
  cluster.sync();
}
