// mbarrier_tma.cuh: the inline-PTX mbarrier and TMA helpers of the chapter's Hopper kernels
// (tma_add_one, wgmma_ws_gemm; sm_90+), one small function per instruction, so that a kernel
// reads as the protocol it follows. tma_add_one.cu walks through the TMA round trip.
//
// Two things every helper here relies on: an mbarrier counts bytes (its "transaction count") as
// well as arrivals, and a phase completes only when both have run out, so waiting on it means
// the data has landed. And the TMA engine works in the async proxy, the kernel's own loads and
// stores in the generic proxy: shared-memory writes cross from one to the other only through a
// proxy fence.

#pragma once

#include <cuda.h>  // CUtensorMap
#include <cstdint>

// PTX shared-memory operands want a 32-bit address in the shared window, not a generic pointer.
__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// ---- mbarriers ---------------------------------------------------------------------------

// A phase completes after `arrivals` arrivals (and whatever bytes they announce).
__device__ __forceinline__ void mbar_init(uint64_t* bar, uint32_t arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(arrivals)
               : "memory");
}

// Release-orders this thread's mbarrier.init operations, at cluster scope, before what it does
// next: a barrier must be initialised before anyone else (a thread, the TMA engine) signals it.
__device__ __forceinline__ void fence_mbarrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

// Makes this thread's generic-proxy writes to shared memory (the mbarrier init, the tile)
// visible to the async proxy, i.e. to the TMA engine. Without it the TMA unit may see stale data.
__device__ __forceinline__ void fence_proxy_async_smem() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_addr(bar)) : "memory");
}

// One arrival plus "expect this many more bytes of async (TMA) writes before the phase may
// complete". Arm first, then issue the copies the bytes belong to.
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)),
               "r"(bytes)
               : "memory");
}

// Spins until the phase with the given parity has completed. A barrier's phases alternate
// 0, 1, 0, ...: the first phase of a fresh barrier is parity 0, the n-th use of a reused one
// waits on parity n & 1. try_wait is a potentially blocking test, not a guaranteed wait: it may
// time out and return false without the phase completing, hence the loop.
__device__ __forceinline__ void mbar_wait_parity(uint64_t* bar, uint32_t parity) {
  uint32_t done = 0;
  while (!done) {
    asm volatile(
        "{\n\t.reg .pred p;\n\t"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
        "selp.u32 %0, 1, 0, p;\n\t}"
        : "=r"(done)
        : "r"(smem_addr(bar)), "r"(parity)
        : "memory");
  }
}

// ---- TMA ---------------------------------------------------------------------------------

// TMA load of one box into shared memory, completing on `bar`. Coordinates are in elements,
// innermost (column) first; they may point partly outside the tensor: the missing elements
// arrive as zeros and still count as bytes toward the barrier.
__device__ __forceinline__ void tma_load_2d(void* dst, const CUtensorMap* map, int32_t col,
                                            int32_t row, uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3}], [%4];" ::"r"(smem_addr(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(col), "r"(row), "r"(smem_addr(bar))
      : "memory");
}

// TMA store of one box; elements outside the tensor are not written. The source must have been
// fenced toward the async proxy (fence_proxy_async_smem) by every thread that wrote it.
__device__ __forceinline__ void tma_store_2d(const CUtensorMap* map, int32_t col, int32_t row,
                                             const void* src) {
  asm volatile(
      "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];" ::"l"(
          reinterpret_cast<uint64_t>(map)),
      "r"(col), "r"(row), "r"(smem_addr(src))
      : "memory");
}

__device__ __forceinline__ void bulk_commit_and_wait_read() {
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
  // ".read": wait only until the TMA engine has read the source (our shared memory), which is
  // what must happen before the block exits and its shared memory is reused. The global writes
  // themselves complete on their own; the kernel's end makes them visible to the host.
  asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
}
