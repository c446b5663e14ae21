// prefetch.cuh: what prefetch_pipeline and prefetch_cp_async_ptx share: the batches each thread
// streams, the per-element work and the scalar tail. The two kernels differ only in how a batch's
// copy is issued and waited for (cuda::pipeline, or the cp.async PTX it compiles to).
//
// Batches (the chapter's layout): one grid-wide batch covers gridDim.x * kThreads int4 vectors;
// thread t of block b owns vector  (batch * gridDim.x + b) * kThreads + t  in every batch, so a
// block's vectors in one batch are contiguous and batches stride over the grid ("grid-stride").

#pragma once

#include <cstdint>

constexpr int kThreads = 256;

// The per-element work the chapter leaves open: out = 2 * in + 1.
__device__ __forceinline__ int4 compute(int4 v) {
  return make_int4(2 * v.x + 1, 2 * v.y + 1, 2 * v.z + 1, 2 * v.w + 1);
}

// This thread's share of the batches of an n-element array.
struct Batches {
  int64_t n4;         // whole int4 vectors
  int64_t per_batch;  // vectors in one grid-wide batch
  int64_t first;      // this thread's vector in batch 0
  int64_t count;      // batches: the same for every thread

  __device__ __forceinline__ explicit Batches(int n)
      : n4(n / 4),
        per_batch(static_cast<int64_t>(gridDim.x) * kThreads),
        first(static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x),
        count((n4 + per_batch - 1) / per_batch) {}

  // This thread's vector in a given batch; past n4 in the last, partial batch (and beyond).
  __device__ __forceinline__ int64_t vec(int64_t batch) const { return first + batch * per_batch; }
  __device__ __forceinline__ bool has(int64_t batch) const { return vec(batch) < n4; }
};

// The n % 4 elements past the last whole int4: block 0 does them with plain loads.
__device__ __forceinline__ void scalar_tail(int* __restrict__ out, const int* __restrict__ in,
                                            int n, const Batches& batches) {
  if (blockIdx.x == 0 && threadIdx.x < (n & 3)) {
    const int i = static_cast<int>(batches.n4 * 4) + static_cast<int>(threadIdx.x);
    out[i] = 2 * in[i] + 1;
  }
}
