// cluster_reduce.cu: every cluster sums its span of x; rank 0 gathers the other blocks' partials
// straight out of their shared memory (DSMEM), so no second kernel launch is needed.
//
// The cluster shape is a launch attribute (1-D clusters of 2, 4, 8 or 16 blocks over a 1-D
// grid), read back here with cluster.num_blocks(). Blocks of one cluster are consecutive in x,
// so block b reduces x[b*chunk, (b+1)*chunk) clamped to n, and cluster c covers
// x[c*S*chunk, (c+1)*S*chunk) for a cluster of S blocks; sums[c] receives that span's sum.
//
// Protocol, and why each barrier is there:
//   1. each block reduces its slice into `block_partial` in its own shared memory;
//   2. cluster.sync(): every partial is written, and the barrier's release/acquire ordering
//      makes those shared-memory writes visible to the other blocks of the cluster (a plain
//      __syncthreads() only orders one block). It also guarantees every peer block has started,
//      which DSMEM access requires;
//   3. rank 0's first warp reads the partials through map_shared_rank(&block_partial, r), one
//      peer per lane so the remote loads overlap, then folds them with shuffles;
//   4. cluster.sync() again: a block's shared memory is released when the block exits, so no
//      peer may leave while rank 0 may still be reading its partial.
//
// Launch: grid = (S * clusters, 1, 1) blocks, cluster = (S, 1, 1), block = (kThreads, 1, 1),
// clusters = ceil(n / (S * chunk)). chunk must be a multiple of 4 (16-byte aligned float4
// slices). S <= 32 (one lane per peer; the hardware allows at most 16).

#include <cooperative_groups.h>
#include <cstddef>

namespace cg = cooperative_groups;

namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kUnroll = 4;  // independent 16-byte loads in flight per thread

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

}  // namespace

extern "C" __global__ void __launch_bounds__(kThreads)
    cluster_reduce(const float* __restrict__ x, float* __restrict__ sums, int n, int chunk) {
  __shared__ float warp_partials[kWarps];
  __shared__ float block_partial;  // what rank 0 reads remotely

  const cg::cluster_group cluster = cg::this_cluster();
  const unsigned rank = cluster.block_rank();
  const unsigned cluster_size = cluster.num_blocks();
  const unsigned cluster_id = blockIdx.x / cluster_size;  // 1-D grid of 1-D clusters

  // This block's slice, clamped to n: at the tail it may be short or empty.
  const size_t begin = static_cast<size_t>(blockIdx.x) * static_cast<size_t>(chunk);
  const size_t end_full = begin + static_cast<size_t>(chunk);
  const size_t end = end_full < static_cast<size_t>(n) ? end_full : static_cast<size_t>(n);
  const int count = begin < end ? static_cast<int>(end - begin) : 0;

  // Streaming part: each thread keeps kUnroll float4 loads in flight before adding any of them,
  // the bytes-in-flight an HBM read needs to approach peak bandwidth.
  const float4* x4 = reinterpret_cast<const float4*>(x + begin);
  const int count4 = count / 4;
  float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
  int i = threadIdx.x;
  for (; i + (kUnroll - 1) * kThreads < count4; i += kUnroll * kThreads) {
    float4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) v[u] = x4[i + u * kThreads];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      acc.x += v[u].x;
      acc.y += v[u].y;
      acc.z += v[u].z;
      acc.w += v[u].w;
    }
  }
  for (; i < count4; i += kThreads) {  // fewer than kUnroll float4 left for this thread
    const float4 v = x4[i];
    acc.x += v.x;
    acc.y += v.y;
    acc.z += v.z;
    acc.w += v.w;
  }
  float v = (acc.x + acc.y) + (acc.z + acc.w);
  // Scalar tail: at most three elements, only in the last non-empty block.
  if (static_cast<int>(threadIdx.x) < count - count4 * 4)
    v += x[begin + static_cast<size_t>(count4) * 4 + threadIdx.x];

  // Block reduction: shuffles inside each warp, then warp 0 folds the per-warp sums.
  v = warp_sum(v);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) warp_partials[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float w = lane < kWarps ? warp_partials[lane] : 0.f;
    w = warp_sum(w);
    if (lane == 0) block_partial = w;
  }

  cluster.sync();  // (2) all partials written and visible cluster-wide; all peers running

  if (rank == 0 && warp == 0) {
    // (3) lane r fetches rank r's partial over the SM-to-SM network (rank 0's own partial is
    // read through the same mapping: map_shared_rank accepts the block's own rank).
    float p = 0.f;
    for (unsigned r = lane; r < cluster_size; r += 32)
      p += *cluster.map_shared_rank(&block_partial, static_cast<int>(r));
    p = warp_sum(p);
    if (lane == 0) sums[cluster_id] = p;
  }

  cluster.sync();  // (4) keep every peer's shared memory alive until rank 0 has read it
}
