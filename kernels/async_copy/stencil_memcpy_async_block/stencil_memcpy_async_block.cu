// stencil_memcpy_async_block.cu: the radius-8 stencil of stencil_sync, with the tile and halos
// copied by the COLLECTIVE cuda::memcpy_async(block, dst, src, size, barrier) form.
//
// y[i] = sum_{k=-8..8} w_k * x[i + k],  w_k = (k + 9) / 256  (1/256 ... 17/256; exact in fp32),
// with x[j] = 0 outside [0, n) (zero padding). The weights are asymmetric so that a halo placed
// one chunk off, or a mirrored window, changes the answer.
//
// Shared-memory layout per block (the chapter's "8 | 32 | 8", center widened to kTile = 2048):
//
//   buf[0 .. 8)            x[tile_start - 8 .. tile_start)          left halo
//   buf[8 .. 8 + kTile)    x[tile_start .. tile_start + kTile)      center
//   buf[8 + kTile .. +8)   x[tile_start + kTile .. + 8)             right halo
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

namespace cg = cooperative_groups;

namespace {

constexpr int kRadius = 8;
constexpr int kThreads = 256;
constexpr int kTile = 2048;  // outputs per block: 8 per thread, as two groups of 4
constexpr int kBuf = kRadius + kTile + kRadius;
constexpr int kCenterChunks = kTile / 4;
constexpr int kGroups = kCenterChunks / kThreads;  // float4 output groups per thread

static_assert(kRadius % 4 == 0 && kTile % 4 == 0, "halo and tile must be whole float4 chunks");
static_assert(kCenterChunks % kThreads == 0, "each thread owns the same number of chunks");

// w_k for k = m - kRadius, m = 0..16: (m + 1) / 256, a compile-time immediate after unrolling.
__device__ __forceinline__ constexpr float weight(int m) {
  return static_cast<float>(m + 1) * (1.0f / 256.0f);
}

// Each thread computes outputs 4b .. 4b+3 of the tile for b = tid and tid + kThreads. They need
// buf[4b .. 4b + 20): five float4 reads; consecutive threads read consecutive chunks, so the
// shared-memory reads are conflict-free.
__device__ __forceinline__ void stencil_store(const float* buf, float* __restrict__ y,
                                              int64_t tile_start, int n) {
  const float4* b4 = reinterpret_cast<const float4*>(buf);
#pragma unroll
  for (int grp = 0; grp < kGroups; ++grp) {
    const int b = static_cast<int>(threadIdx.x) + grp * kThreads;
    float v[20];
#pragma unroll
    for (int i = 0; i < 5; ++i) {
      const float4 q = b4[b + i];
      v[4 * i + 0] = q.x;
      v[4 * i + 1] = q.y;
      v[4 * i + 2] = q.z;
      v[4 * i + 3] = q.w;
    }
    float r[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      float acc = 0.0f;
#pragma unroll
      for (int m = 0; m <= 2 * kRadius; ++m) acc = fmaf(weight(m), v[j + m], acc);
      r[j] = acc;
    }
    const int64_t gi = tile_start + 4 * static_cast<int64_t>(b);
    if (gi + 4 <= n) {
      *reinterpret_cast<float4*>(y + gi) = make_float4(r[0], r[1], r[2], r[3]);
    } else {
#pragma unroll
      for (int j = 0; j < 4; ++j)
        if (gi + j < n) y[gi + j] = r[j];
    }
  }
}

}  // namespace
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
