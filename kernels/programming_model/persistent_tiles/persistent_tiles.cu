// persistent_tiles.cu: a persistent grid (SMs x resident blocks per SM, launched once) whose
// blocks take tiles from an atomic counter until none are left.
//
// One block per tile lets the hardware queue as many blocks as there are tiles; a persistent
// kernel instead launches just enough blocks to fill the GPU once, and every block loops:
//   claim the next tile index with atomicAdd on a global counter -> process it -> repeat.
// Blocks that get cheap tiles simply come back sooner, so the load balances itself, and the
// block start-up cost is paid once per block rather than once per tile.
//
// Tile t covers x[t * tile_elems, min((t + 1) * tile_elems, n)); the work is y = x * 2 + 1.
// To prove that every tile was done exactly once, the block that processes tile t adds 1 to
// visit_scratch[t]. When all blocks are done, the last block to finish (found with a second
// atomic counter, the "last block out" pattern) copies those counts to visits[]: the test
// expects all ones. The counters live in scratch buffers that start at zero on every run.
//
// The claim is prefetched: thread 0 claims tile k+1 as soon as tile k's index is known, so the
// atomic's round trip to L2 overlaps tile k's work. The index goes through a two-slot shared
// array, so that one __syncthreads() per tile both publishes the next index and guarantees
// that the slot thread 0 writes next has been read by everyone.
//
// Launch: grid = (SMs x max resident blocks per SM, 1, 1), block = (kThreads, 1, 1),
// no dynamic shared memory. tile_elems must be a positive multiple of 4.
// counters[0] = next tile, counters[1] = finished blocks; visit_scratch[ntiles]; both zero.

#include <cstddef>

namespace {

constexpr int kThreads = 256;
constexpr int kUnroll = 4;  // float4s per thread loaded before any is stored

__device__ __forceinline__ float4 two_x_plus_one(const float4 v) {
  return make_float4(v.x * 2.f + 1.f, v.y * 2.f + 1.f, v.z * 2.f + 1.f, v.w * 2.f + 1.f);
}

// y = 2x + 1 over one tile of `count` elements starting at a 16-byte aligned x / y.
__device__ __forceinline__ void process_tile(const float* __restrict__ x, float* __restrict__ y,
                                             int count) {
  const int count4 = count / 4;
  const float4* x4 = reinterpret_cast<const float4*>(x);
  float4* y4 = reinterpret_cast<float4*>(y);
  int i = threadIdx.x;
  for (; i + (kUnroll - 1) * kThreads < count4; i += kUnroll * kThreads) {
    float4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) v[u] = x4[i + u * kThreads];  // all loads first
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) y4[i + u * kThreads] = two_x_plus_one(v[u]);
  }
  for (; i < count4; i += kThreads) y4[i] = two_x_plus_one(x4[i]);
  // At most three trailing elements, in the last tile only.
  const int j = count4 * 4 + threadIdx.x;
  if (j < count) y[j] = x[j] * 2.f + 1.f;
}

}  // namespace

extern "C" __global__ void __launch_bounds__(kThreads)
    persistent_tiles(const float* __restrict__ x, float* __restrict__ y,
                     int* __restrict__ visits, int* __restrict__ counters,
                     int* __restrict__ visit_scratch, int n, int tile_elems, int ntiles) {
  __shared__ int claimed[2];  // tile index for step k lives in claimed[k & 1]
  __shared__ bool last_block;

  if (threadIdx.x == 0) claimed[0] = atomicAdd(&counters[0], 1);
  __syncthreads();

  for (int k = 0;; ++k) {
    const int tile = claimed[k & 1];  // the same value in every thread: a uniform loop exit
    if (tile >= ntiles) break;
    // Claim the following tile now, into a register: the atomic's round trip overlaps this
    // tile's loads and stores, and thread 0 only needs the result at the end of the step.
    int next = 0;
    if (threadIdx.x == 0) next = atomicAdd(&counters[0], 1);

    const size_t begin = static_cast<size_t>(tile) * static_cast<size_t>(tile_elems);
    const int count = min(tile_elems, n - static_cast<int>(begin));
    process_tile(x + begin, y + begin, count);

    if (threadIdx.x == 0) {
      atomicAdd(&visit_scratch[tile], 1);
      // The other slot: its last readers read it in step k - 1, before that step's barrier.
      // This slot (k & 1) may still be unread by a slow warp of this step, hence two slots.
      claimed[(k + 1) & 1] = next;
    }
    __syncthreads();  // publishes claimed[(k + 1) & 1] to the whole block
  }

  // Last block out. Each block's visit increments precede its fence and its ticket; the block
  // whose ticket is gridDim.x - 1 therefore comes after every other block's increments.
  if (threadIdx.x == 0) {
    __threadfence();  // release: this block's visit increments before its ticket
    const int ticket = atomicAdd(&counters[1], 1);
    last_block = ticket == static_cast<int>(gridDim.x) - 1;
    __threadfence();  // acquire side, for the reads below
  }
  __syncthreads();  // hands last_block (and the fence's ordering) to the whole block
  if (last_block) {
    // __ldcg reads at L2, where the atomics were performed, never from a stale L1 line.
    for (int t = threadIdx.x; t < ntiles; t += kThreads) visits[t] = __ldcg(&visit_scratch[t]);
  }
}
