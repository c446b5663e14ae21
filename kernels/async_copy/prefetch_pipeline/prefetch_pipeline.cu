// prefetch_pipeline.cu: out = 2 * in + 1 (int32), each thread streaming its batches through a
// kStages-deep cuda::pipeline<thread_scope_thread> that prefetches global -> shared.
//
// The batches each thread streams, the per-element work and the scalar tail are in
// ../prefetch.cuh, shared by the two prefetch kernels; this file is about the copies.
//
// Each thread has kStages shared-memory slots, one int4 per stage:
//
//   prologue:  copy batches 0 .. kStages-1 into slots 0 .. kStages-1, one commit each
//   loop b:    wait until batch b's copy has landed (at most kStages-1 newer ones in flight),
//              compute batch b from its slot, refill that slot with batch b + kStages, commit.
//
// So while batch b is computed, the next kStages-1 batches are already on their way: more bytes
// in flight per thread than a load-then-use loop, which is what hides DRAM latency.
//
// The thread-scope pipeline is cp.async bookkeeping in disguise: memcpy_async with
// aligned_size_t<16> is one cp.async.cg (LDGSTS.128, L1 bypass), producer_commit() is
// cp.async.commit_group, and pipeline_consumer_wait_prior<N>() is cp.async.wait_group N ("all but
// the N most recent groups are complete"); producer_acquire / consumer_release are no-ops at
// thread scope. Every loop iteration commits exactly once, even when there is nothing left to
// fetch (an empty group), so "the N most recent groups" always means the N batches after b.
//
// The chapter puts __syncthreads() around the compute step because its threads may read each
// other's staged data. Here each thread reads only the slot it filled itself, and its own
// wait_group covers its own copies, so no block barrier is needed (and none is paid for).
//
// Launch: grid = (any number of blocks, 1, 1), block = (kThreads, 1, 1),
// dynamic shared memory = kStages * kThreads * 16 bytes. Entries: prefetch_pipeline_stages{2,3,4}.

#include <cuda/pipeline>
#include <cstdint>

#include "../prefetch.cuh"

namespace {

template <int kStages>
__device__ __forceinline__ void prefetch(int* __restrict__ out, const int* __restrict__ in, int n) {
  static_assert(kStages >= 1 && kStages <= 8, "cp.async.wait_group takes 0..7 pending groups");
  extern __shared__ int4 stage_buf[];  // stage s of thread t: stage_buf[s * kThreads + t]

  const Batches batches(n);
  const int4* in4 = reinterpret_cast<const int4*>(in);
  int4* out4 = reinterpret_cast<int4*>(out);
  int4* slots = stage_buf + threadIdx.x;

  cuda::pipeline<cuda::thread_scope_thread> pipe = cuda::make_pipeline();

  // Prologue: fill every stage. Batches that do not exist still commit (empty) groups.
  for (int s = 0; s < kStages; ++s) {
    pipe.producer_acquire();
    if (batches.has(s)) {
      cuda::memcpy_async(slots + s * kThreads, in4 + batches.vec(s),
                         cuda::aligned_size_t<16>(sizeof(int4)), pipe);
    }
    pipe.producer_commit();
  }

  int stage = 0;
  for (int64_t b = 0, fetch = kStages; b < batches.count; ++b, ++fetch) {
    // kStages + b groups committed so far; leaving kStages-1 pending means group b is done.
    cuda::pipeline_consumer_wait_prior<kStages - 1>(pipe);
    if (batches.has(b)) out4[batches.vec(b)] = compute(slots[stage * kThreads]);
    pipe.consumer_release();

    // Refill the slot just consumed. The read above has already delivered its value to this
    // thread, and only this thread writes the slot, so the copy cannot overwrite unread data.
    pipe.producer_acquire();
    if (batches.has(fetch)) {
      cuda::memcpy_async(slots + stage * kThreads, in4 + batches.vec(fetch),
                         cuda::aligned_size_t<16>(sizeof(int4)), pipe);
    }
    pipe.producer_commit();  // always commit: keeps one group per batch
    stage = stage + 1 == kStages ? 0 : stage + 1;
  }
  // Every real copy was waited for above (fetches past the last batch are empty groups), so no
  // copy is still writing shared memory when the block exits.

  scalar_tail(out, in, n, batches);
}

}  // namespace

extern "C" __global__ void __launch_bounds__(kThreads)
    prefetch_pipeline_stages2(int* __restrict__ out, const int* __restrict__ in, int n) {
  prefetch<2>(out, in, n);
}

extern "C" __global__ void __launch_bounds__(kThreads)
    prefetch_pipeline_stages3(int* __restrict__ out, const int* __restrict__ in, int n) {
  prefetch<3>(out, in, n);
}

extern "C" __global__ void __launch_bounds__(kThreads)
    prefetch_pipeline_stages4(int* __restrict__ out, const int* __restrict__ in, int n) {
  prefetch<4>(out, in, n);
}
