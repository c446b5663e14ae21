// cluster_dsmem_exchange.cu: distributed shared memory, the smallest test (chapter exercise 3).
// Two blocks form a cluster; each fills its own shared memory, then reads its peer's shared
// memory through cluster.map_shared_rank() and writes what it read to global memory.
//
// Block b (cluster c = b / 2, rank r = b % 2) owns row b of x and y, `elems` floats each:
//   1. tile[i] = 2 * x[b][i] + (r + 1)            its own pattern, in its own shared memory;
//   2. cluster.sync()                             the tile is written and visible to the peer
//      (the barrier's release/acquire covers shared memory across the cluster; __syncthreads()
//      alone would not), and the peer block is known to be running;
//   3. y[b][i] = peer_tile[i], peer_tile = cluster.map_shared_rank(tile, r ^ 1): a load that
//      travels the SM-to-SM network from the other block's SM, not through L2;
//   4. cluster.sync()                             neither block exits (freeing its tile) while
//      the other may still be reading it.
// So y[2c + 1] must equal block 2c's pattern and y[2c] block 2c + 1's: rank 1 reads what rank 0
// wrote (the exercise) and, symmetrically, rank 0 reads rank 1. Reading one's own tile by
// mistake, or reading before the barrier, gives different numbers.
//
// Launch: grid = (2 * clusters, 1, 1), block = (kThreads, 1, 1), dynamic shared memory =
// elems * 4 bytes. elems must be a multiple of 4 (float4 rows, 16-byte aligned).

#include <cooperative_groups.h>
#include <cstddef>

namespace cg = cooperative_groups;

namespace {

constexpr int kThreads = 256;
constexpr int kUnroll = 4;  // float4 accesses in flight per thread

}  // namespace

extern "C" __global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(kThreads)
    cluster_dsmem_exchange(const float* __restrict__ x, float* __restrict__ y, int elems) {
  extern __shared__ float4 tile[];  // elems / 4 float4: this block's half of the exchange

  const cg::cluster_group cluster = cg::this_cluster();
  const unsigned rank = cluster.block_rank();
  const int n4 = elems / 4;
  const size_t row = static_cast<size_t>(blockIdx.x) * static_cast<size_t>(n4);
  const float4* src = reinterpret_cast<const float4*>(x) + row;
  float4* dst = reinterpret_cast<float4*>(y) + row;

  // (1) Fill the own tile with a pattern that differs from anything in global memory.
  // Loads are batched kUnroll deep so several global reads are in flight per thread.
  const float bias = static_cast<float>(rank + 1);
  for (int base = threadIdx.x; base < n4; base += kUnroll * kThreads) {
    float4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (base + u * kThreads < n4) v[u] = src[base + u * kThreads];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (base + u * kThreads < n4)
        tile[base + u * kThreads] = make_float4(2.f * v[u].x + bias, 2.f * v[u].y + bias,
                                                2.f * v[u].z + bias, 2.f * v[u].w + bias);
  }

  cluster.sync();  // (2) publish the tile to the peer block

  // (3) The peer's tile, mapped into this block's view: same offset, other block's shared memory.
  const float4* peer = cluster.map_shared_rank(tile, static_cast<int>(rank ^ 1u));
  // Remote loads cost more latency than local ones: issue kUnroll before the first store.
  for (int base = threadIdx.x; base < n4; base += kUnroll * kThreads) {
    float4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (base + u * kThreads < n4) v[u] = peer[base + u * kThreads];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (base + u * kThreads < n4) dst[base + u * kThreads] = v[u];
  }

  cluster.sync();  // (4) the peer still reads our tile: stay resident until it is done
}
