// prefetch_cp_async_ptx.cu: prefetch_pipeline written with raw PTX instead of cuda::pipeline.
// out = 2 * in + 1 (int32), each thread streaming its batches through kStages shared-memory slots.
//
// The batches each thread streams, the per-element work and the scalar tail are in
// ../prefetch.cuh, shared by the two prefetch kernels; this file is about the copies.
//
//   prologue:  cp.async batches 0 .. kStages-1 into slots 0 .. kStages-1, one commit_group each
//   loop b:    cp.async.wait_group kStages-1 (batch b's group has landed), compute batch b from
//              its slot, cp.async batch b + kStages into that slot, commit_group.
//
// The three PTX instructions the chapter lists, and what cuda::pipeline maps onto them:
//   cp.async.cg.shared.global [dst], [src], 16   memcpy_async(..., aligned_size_t<16>, pipe):
//       a 16-byte global -> shared copy (SASS LDGSTS.128). ".cg" caches in L2 only, bypassing L1,
//       and .cg exists only for 16 bytes: hence int4 per thread, 16-byte aligned both ends.
//   cp.async.commit_group                         producer_commit(): closes the group of all this
//       thread's cp.async issued since the previous commit.
//   cp.async.wait_group N                         pipeline_consumer_wait_prior<N>(): blocks until
//       at most N of this thread's most recent groups are still pending. N must be an immediate,
//       hence the template parameter.
// Every iteration commits exactly once, even with nothing left to fetch (an empty group is
// legal), so group i is always batch i and "N most recent" always means the N batches after b.
//
// The asm statements carry "memory" clobbers: the compiler must not move the shared-memory read
// of a slot above the wait_group, nor the next copy into that slot above the read.
//
// Groups are per thread and each thread reads only the slot it filled itself, so no block
// barrier is needed (the chapter's __syncthreads() is for threads that share staged data).
//
// Launch: grid = (any number of blocks, 1, 1), block = (kThreads, 1, 1),
// dynamic shared memory = kStages * kThreads * 16 bytes.
// Entries: prefetch_cp_async_ptx_stages{2,3,4}.

#include <cstdint>

#include "../prefetch.cuh"

namespace {

// 16-byte asynchronous copy global -> shared. PTX wants a shared-window address (32 bit) for the
// destination and a global address for the source, not generic pointers.
__device__ __forceinline__ void cp_async_cg_16(void* smem_dst, const void* gmem_src) {
  const uint32_t dst = static_cast<uint32_t>(__cvta_generic_to_shared(smem_dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst),
               "l"(__cvta_generic_to_global(gmem_src))
               : "memory");
}

__device__ __forceinline__ void cp_async_commit_group() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}

template <int kPending>
__device__ __forceinline__ void cp_async_wait_group() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

template <int kStages>
__device__ __forceinline__ void prefetch(int* __restrict__ out, const int* __restrict__ in, int n) {
  static_assert(kStages >= 1 && kStages <= 8, "a few stages; each costs kThreads * 16 B");
  extern __shared__ int4 stage_buf[];  // stage s of thread t: stage_buf[s * kThreads + t]

  const Batches batches(n);
  const int4* in4 = reinterpret_cast<const int4*>(in);
  int4* out4 = reinterpret_cast<int4*>(out);
  int4* slots = stage_buf + threadIdx.x;

  // Prologue: fill every stage. Batches that do not exist still commit (empty) groups.
  for (int s = 0; s < kStages; ++s) {
    if (batches.has(s)) cp_async_cg_16(slots + s * kThreads, in4 + batches.vec(s));
    cp_async_commit_group();
  }

  int stage = 0;
  for (int64_t b = 0, fetch = kStages; b < batches.count; ++b, ++fetch) {
    // kStages + b groups committed so far; leaving kStages-1 pending means group b is done.
    cp_async_wait_group<kStages - 1>();
    if (batches.has(b)) out4[batches.vec(b)] = compute(slots[stage * kThreads]);

    // Refill the slot just consumed. The read above has already delivered its value to this
    // thread, and only this thread writes the slot, so the copy cannot overwrite unread data.
    if (batches.has(fetch)) cp_async_cg_16(slots + stage * kThreads, in4 + batches.vec(fetch));
    cp_async_commit_group();  // always commit: keeps one group per batch
    stage = stage + 1 == kStages ? 0 : stage + 1;
  }
  // Every real copy was waited for above (fetches past the last batch are empty groups), so no
  // copy is still writing shared memory when the block exits.

  scalar_tail(out, in, n, batches);
}

}  // namespace

extern "C" __global__ void __launch_bounds__(kThreads)
    prefetch_cp_async_ptx_stages2(int* __restrict__ out, const int* __restrict__ in, int n) {
  prefetch<2>(out, in, n);
}

extern "C" __global__ void __launch_bounds__(kThreads)
    prefetch_cp_async_ptx_stages3(int* __restrict__ out, const int* __restrict__ in, int n) {
  prefetch<3>(out, in, n);
}

extern "C" __global__ void __launch_bounds__(kThreads)
    prefetch_cp_async_ptx_stages4(int* __restrict__ out, const int* __restrict__ in, int n) {
  prefetch<4>(out, in, n);
}
