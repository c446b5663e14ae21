// block_reduce.cu: one partial sum per block, finished by a shared-memory tree; block size is a
// template parameter (128 / 256 / 512), each instantiation behind its own extern "C" entry.
//
// Block b owns the slice x[b * chunk, min((b + 1) * chunk, n)) and writes its sum to
// partials[b]. The work splits into two phases:
//   1. streaming: every thread accumulates a private float4 over its share of the slice, with
//      kUnroll independent 16-byte loads issued before any add, so several loads per thread are
//      in flight (that, not the arithmetic, is what keeps HBM busy);
//   2. the tree: each thread parks its value in shared memory and the block halves the active
//      range each step (s = BLOCK/2, BLOCK/4, ...) with a __syncthreads() between steps, because
//      step k reads what other threads wrote in step k-1. Once only 64 values are left, the
//      last warp finishes with shuffles: a warp needs no barrier and no shared memory.
//
// Launch: grid = (ceil(n / chunk), 1, 1), block = (BLOCK, 1, 1), no dynamic shared memory.
// chunk must be a positive multiple of 4 so every block's slice starts 16-byte aligned.

#include <cstddef>

namespace {

constexpr int kUnroll = 4;  // float4 loads in flight per thread in the main loop

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

template <int BLOCK>
__device__ __forceinline__ void block_reduce_impl(const float* __restrict__ x,
                                                  float* __restrict__ partials, int n, int chunk) {
  static_assert(BLOCK >= 64 && (BLOCK & (BLOCK - 1)) == 0, "the tree needs a power of two >= 64");
  __shared__ float smem[BLOCK];
  const int tid = threadIdx.x;

  // This block's slice, clamped to n (only the last block is short).
  const size_t begin = static_cast<size_t>(blockIdx.x) * static_cast<size_t>(chunk);
  const size_t end_full = begin + static_cast<size_t>(chunk);
  const size_t end = end_full < static_cast<size_t>(n) ? end_full : static_cast<size_t>(n);
  const size_t count = end - begin;  // grid = ceil(n / chunk): never empty
  const size_t count4 = count / 4;
  const float4* x4 = reinterpret_cast<const float4*>(x + begin);

  // Phase 1. Consecutive threads read consecutive float4s: each warp load is 512 contiguous
  // bytes. The unrolled body issues all kUnroll loads before the first add needs one.
  float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
  size_t i = tid;
  for (; i + (kUnroll - 1) * BLOCK < count4; i += kUnroll * BLOCK) {
    float4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) v[u] = x4[i + u * BLOCK];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      acc.x += v[u].x;
      acc.y += v[u].y;
      acc.z += v[u].z;
      acc.w += v[u].w;
    }
  }
  for (; i < count4; i += BLOCK) {  // fewer than kUnroll float4s left for this thread
    const float4 v = x4[i];
    acc.x += v.x;
    acc.y += v.y;
    acc.z += v.z;
    acc.w += v.w;
  }
  float v = (acc.x + acc.y) + (acc.z + acc.w);
  // Scalar tail of at most three elements (only the last block can have one).
  for (size_t j = count4 * 4 + tid; j < count; j += BLOCK) v += x[begin + j];

  // Phase 2: the shared-memory tree. Each step halves the number of live values.
  smem[tid] = v;
  __syncthreads();
#pragma unroll
  for (int s = BLOCK / 2; s >= 64; s >>= 1) {
    if (tid < s) smem[tid] += smem[tid + s];
    __syncthreads();  // step s/2 reads what this step wrote, across warps
  }
  // 64 values left: warp 0 folds them in registers. No barrier is needed past this point,
  // since only warp 0 touches the data and shuffles synchronise the warp themselves.
  if (tid < 32) {
    float w = smem[tid] + smem[tid + 32];
    w = warp_sum(w);
    if (tid == 0) partials[blockIdx.x] = w;
  }
}

}  // namespace

// Second __launch_bounds__ argument: 2048 threads resident per SM, i.e. at most 32 registers,
// so a full SM of threads keeps its loads in flight.
extern "C" __global__ void __launch_bounds__(128, 16)
    block_reduce_block128(const float* __restrict__ x, float* __restrict__ partials, int n,
                          int chunk) {
  block_reduce_impl<128>(x, partials, n, chunk);
}

extern "C" __global__ void __launch_bounds__(256, 8)
    block_reduce_block256(const float* __restrict__ x, float* __restrict__ partials, int n,
                          int chunk) {
  block_reduce_impl<256>(x, partials, n, chunk);
}

extern "C" __global__ void __launch_bounds__(512, 4)
    block_reduce_block512(const float* __restrict__ x, float* __restrict__ partials, int n,
                          int chunk) {
  block_reduce_impl<512>(x, partials, n, chunk);
}
