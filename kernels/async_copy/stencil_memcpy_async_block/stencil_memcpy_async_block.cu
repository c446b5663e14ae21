// stencil_memcpy_async_block.cu: the radius-8 stencil of stencil_sync, with the tile and halos
// copied by the COLLECTIVE cuda::memcpy_async(block, dst, src, size, barrier) form.
//
// The stencil, its weights and the shared-memory layout (left halo | center | right halo) are in
// ../stencil.cuh, which all three stencil kernels share; this file is about filling the buffer.
//
// The collective form: every thread of the block calls memcpy_async with the SAME arguments and
// the library splits the work. No "if (tid < 8)" bookkeeping; the price is that the arguments
// must be block-uniform. What the library emits depends on the target:
//   sm_80:  a strided loop, each thread issuing 16-byte cp.async.cg (LDGSTS.128, L1 bypass),
//           tied to the barrier with cp.async.mbarrier.arrive (the phase also waits for them);
//   sm_90+: one thread issues a single cp.async.bulk (a 1-D TMA copy) for the whole range and
//           adds its byte count to the barrier's transaction count (expect_tx).
// Either way the barrier phase completes only when every thread has arrived and every byte has
// landed, so arrive_and_wait() is the only synchronisation the tile needs.
//
// cuda::aligned_size_t<16> promises 16-byte aligned source, destination and size. tile_start is a
// multiple of 4 floats and the buffer is 128-byte aligned, so each of the three pieces qualifies
// once clipped to whole 16-byte chunks inside [0, n). What the clipping leaves out (the left halo
// of block 0, the tail past the last whole chunk of x, and the zero padding beyond n) is filled
// with plain loads and stores by the first/last block before it arrives on the barrier; those
// elements never overlap an asynchronous copy.
//
// Launch: grid = (ceil(n / kTile), 1, 1), block = (kThreads, 1, 1), no dynamic shared memory.

#include <cooperative_groups.h>
#include <cuda/barrier>
#include <cstdint>

#include "../stencil.cuh"

namespace cg = cooperative_groups;

extern "C" __global__ void __launch_bounds__(kThreads)
    stencil_memcpy_async_block(const float* __restrict__ x, float* __restrict__ y, int n) {
  using barrier_t = cuda::barrier<cuda::thread_scope_block>;
  // 16-byte alignment is required by the copies; 128 is what the chapter recommends.
  __shared__ alignas(128) float buf[kBuf];
  // A __shared__ object cannot be constructed by its declaration; init() below does it.
#pragma nv_diag_suppress static_var_with_dynamic_init
  __shared__ barrier_t bar;

  cg::thread_block block = cg::this_thread_block();
  const int64_t tile_start = static_cast<int64_t>(blockIdx.x) * kTile;
  const int64_t g0 = tile_start - kRadius;  // global index of buf[0]
  const int64_t n_whole = static_cast<int64_t>(n) & ~int64_t{3};  // end of the last whole chunk

  if (block.thread_rank() == 0) {
    init(&bar, block.size());  // expected arrivals: every thread of the block
#if __CUDA_ARCH__ >= 900
    // On sm_90+ the copies below are cp.async.bulk, executed by the async proxy (TMA unit),
    // which must observe the initialised barrier before it signals completion on it.
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
  }
  block.sync();  // nobody may use the barrier before it is initialised

  // Collective copy of buf[off, off + count) <- x[g0 + off, ...), clipped to whole chunks inside
  // [0, n_whole). All inputs are block-uniform, so every thread takes the same branch, as the
  // collective call requires. An empty range (left halo of block 0, pieces past n) issues nothing.
  auto copy_piece = [&](int off, int count) {
    const int64_t lo = max(g0 + off, int64_t{0});
    const int64_t hi = min(g0 + off + count, n_whole);
    if (hi > lo) {
      cuda::memcpy_async(block, buf + (lo - g0), x + lo,
                         cuda::aligned_size_t<16>(static_cast<size_t>(hi - lo) * sizeof(float)),
                         bar);
    }
  };
  copy_piece(0, kRadius);                  // left halo
  copy_piece(kRadius, kTile);              // center
  copy_piece(kRadius + kTile, kRadius);    // right halo

  // First and last block only: the elements the clipped copies skipped. Zero padding outside
  // [0, n); the up-to-3 elements of a partial last chunk are read one by one.
  if (g0 < 0 || g0 + kBuf > n_whole) {
    for (int j = static_cast<int>(block.thread_rank()); j < kBuf; j += kThreads) {
      const int64_t g = g0 + j;
      if (g < 0 || g >= n_whole) buf[j] = g >= 0 && g < n ? x[g] : 0.0f;
    }
  }

  bar.arrive_and_wait();  // all arrivals + all copies complete: the tile is in buf
  stencil_store(buf, y, tile_start, n);
}
