// prefetch_pipeline.cu: out = 2 * in + 1 (int32), each thread streaming its batches through a
// kStages-deep cuda::pipeline<thread_scope_thread> that prefetches global -> shared.
//
// Batches (the chapter's layout): one grid-wide batch covers gridDim.x * kThreads int4 vectors;
// thread t of block b owns vector  (batch * gridDim.x + b) * kThreads + t  in every batch, so a
// block's vectors in one batch are contiguous and batches stride over the grid ("grid-stride").
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
// The n % 4 scalar tail (past the last whole int4) is done by block 0 with plain loads.
//
// Launch: grid = (any number of blocks, 1, 1), block = (kThreads, 1, 1),
// dynamic shared memory = kStages * kThreads * 16 bytes. Entries: prefetch_pipeline_stages{2,3,4}.

#include <cuda/pipeline>
#include <cstdint>

namespace {

constexpr int kThreads = 256;

// The per-element work the chapter leaves open: out = 2 * in + 1.
__device__ __forceinline__ int4 compute(int4 v) {
  return make_int4(2 * v.x + 1, 2 * v.y + 1, 2 * v.z + 1, 2 * v.w + 1);
}

template <int kStages>
__device__ __forceinline__ void prefetch(int* __restrict__ out, const int* __restrict__ in, int n) {
  static_assert(kStages >= 1 && kStages <= 8, "cp.async.wait_group takes 0..7 pending groups");
  extern __shared__ int4 stage_buf[];  // stage s of thread t: stage_buf[s * kThreads + t]

  const int64_t n4 = n / 4;  // whole int4 vectors
  const int64_t per_batch = static_cast<int64_t>(gridDim.x) * kThreads;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  const int64_t batches = (n4 + per_batch - 1) / per_batch;  // the same for every thread
  const int4* in4 = reinterpret_cast<const int4*>(in);
  int4* out4 = reinterpret_cast<int4*>(out);
  int4* slots = stage_buf + threadIdx.x;

  // This thread's vector in a given batch; past n4 in the last, partial batch (and beyond).
  auto vec = [&](int64_t batch) { return first + batch * per_batch; };

  cuda::pipeline<cuda::thread_scope_thread> pipe = cuda::make_pipeline();

  // Prologue: fill every stage. Batches that do not exist still commit (empty) groups.
  for (int s = 0; s < kStages; ++s) {
    pipe.producer_acquire();
    if (vec(s) < n4) {
      cuda::memcpy_async(slots + s * kThreads, in4 + vec(s), cuda::aligned_size_t<16>(sizeof(int4)),
                         pipe);
    }
    pipe.producer_commit();
  }

  int stage = 0;
  for (int64_t b = 0, fetch = kStages; b < batches; ++b, ++fetch) {
    // kStages + b groups committed so far; leaving kStages-1 pending means group b is done.
    cuda::pipeline_consumer_wait_prior<kStages - 1>(pipe);
    if (vec(b) < n4) out4[vec(b)] = compute(slots[stage * kThreads]);
    pipe.consumer_release();

    // Refill the slot just consumed. The read above has already delivered its value to this
    // thread, and only this thread writes the slot, so the copy cannot overwrite unread data.
    pipe.producer_acquire();
    if (vec(fetch) < n4) {
      cuda::memcpy_async(slots + stage * kThreads, in4 + vec(fetch),
                         cuda::aligned_size_t<16>(sizeof(int4)), pipe);
    }
    pipe.producer_commit();  // always commit: keeps one group per batch
    stage = stage + 1 == kStages ? 0 : stage + 1;
  }
  // Every real copy was waited for above (fetches past the last batch are empty groups), so no
  // copy is still writing shared memory when the block exits.

  if (blockIdx.x == 0 && threadIdx.x < (n & 3)) {
    const int i = static_cast<int>(n4 * 4) + static_cast<int>(threadIdx.x);
    out[i] = 2 * in[i] + 1;
  }
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
