// stencil_memcpy_async_thread.cu: the radius-8 stencil of stencil_sync, with the tile and halos
// copied by per-thread cuda::memcpy_async calls that complete on a block-scope cuda::barrier.
//
// The stencil, its weights and the shared-memory layout (left halo | center | right halo) are in
// ../stencil.cuh, which all three stencil kernels share; this file is about filling the buffer.
//
// What it buys over the synchronous version: memcpy_async goes global -> shared without
// passing through registers, so the branches around the halo copies cannot serialise
// "load, wait, store"; every thread's copies are in flight at once (8 KB per block, 64 KB per SM
// at 8 blocks) and the thread only blocks at the barrier.
//
// How the barrier counts: init(&bar, blockDim) expects one arrival per thread. Each memcpy_async
// bound to the barrier becomes a cp.async (LDGSTS) followed by cp.async.mbarrier.arrive, which
// holds the current phase open until this thread's earlier copies have landed. arrive_and_wait()
// returns once all threads have arrived AND all copies have landed, and it orders every thread's
// plain shared-memory stores before the arrival too, so the chapter's extra __syncthreads() after
// it is not needed here.
//
// Why cuda::aligned_size_t<8> and 8-byte pieces, not the 16-byte chunks one would expect: the
// alignment promise picks the instruction. With aligned_size_t<16> (or float4 pointers), libcu++
// on sm_90+ lowers a global->shared copy on a shared-memory block barrier to cp.async.bulk, a 1-D
// TMA copy whose operands must be warp-uniform, so the SASS serialises it: one lane at a time
// (ELECT + UBLKCP loop), ~516 16-byte TMA copies per block; measured on H200 at 32% of the DRAM
// roofline. aligned_size_t<8> is below the bulk copy's 16-byte minimum and takes the sm_80 path
// on every target: each copy is ONE LDGSTS.64 (cp.async.ca, 8 bytes), all 32 lanes of a warp in
// one instruction, consecutive lanes on consecutive pieces (256 contiguous bytes per warp).
// The promise itself: tile_start is a multiple of 2 floats and the buffer is 128-byte aligned, so
// every piece's source and destination are 8-byte aligned and its size is 8. Pieces that straddle
// n or lie outside [0, n) (first and last block only) cannot be copied whole; those threads fill
// them with plain loads (zeros for the missing elements).
//
// Launch: grid = (ceil(n / kTile), 1, 1), block = (kThreads, 1, 1), no dynamic shared memory.

#include <cuda/barrier>
#include <cstdint>

#include "../stencil.cuh"

namespace {

constexpr int kPiece = 2;                      // floats per asynchronous copy: 8 bytes
constexpr int kHaloPieces = kRadius / kPiece;  // pieces per halo
constexpr int kCenterPieces = kTile / kPiece;
constexpr int kCopies = kCenterPieces / kThreads;  // center pieces per thread

static_assert(kCenterPieces % kThreads == 0, "each thread copies the same number of pieces");
static_assert(kHaloPieces <= kThreads / 2, "halo loaders must be distinct threads");

// Piece starting at global index g when it is not entirely inside [0, n): zero padding.
__device__ __forceinline__ float2 load_piece_guarded(const float* __restrict__ x, int64_t g,
                                                     int n) {
  float e[kPiece];
#pragma unroll
  for (int j = 0; j < kPiece; ++j) e[j] = (g + j >= 0 && g + j < n) ? x[g + j] : 0.0f;
  return make_float2(e[0], e[1]);
}

}  // namespace
extern "C" __global__ void __launch_bounds__(kThreads)
    stencil_memcpy_async_thread(const float* __restrict__ x, float* __restrict__ y, int n) {
  using barrier_t = cuda::barrier<cuda::thread_scope_block>;
  // 128-byte alignment: the chapter's advice for async copies; 8 is what the copies require.
  __shared__ alignas(128) float buf[kBuf];
  // A __shared__ object cannot be constructed by its declaration; init() below does it.
#pragma nv_diag_suppress static_var_with_dynamic_init
  __shared__ barrier_t bar;
  float2* b2 = reinterpret_cast<float2*>(buf);

  const int t = static_cast<int>(threadIdx.x);
  const int64_t tile_start = static_cast<int64_t>(blockIdx.x) * kTile;
  const int64_t g0 = tile_start - kRadius;  // global index of buf[0]

  if (t == 0) init(&bar, kThreads);  // expected arrivals: every thread of the block
  __syncthreads();                      // nobody may use the barrier before it is initialised

  // Piece p of buf: an aligned 8-byte asynchronous copy, or a guarded fill at the array ends.
  // float pointers on purpose: with float4 pointers libcu++ would assume 16-byte alignment.
  auto copy = [&](int p) {
    const int64_t g = g0 + kPiece * static_cast<int64_t>(p);
    if (g >= 0 && g + kPiece <= n) {
      cuda::memcpy_async(buf + kPiece * p, x + g, cuda::aligned_size_t<8>(8), bar);
    } else {
      b2[p] = load_piece_guarded(x, g, n);
    }
  };

  // Same split as the chapter's version 1: halo threads issue their extra copy, all threads copy
  // the center. Nothing waits here; the copies overlap each other.
  if (t < kHaloPieces) {
    copy(t);  // left halo
  } else if (t >= kThreads - kHaloPieces) {
    copy(kHaloPieces + kCenterPieces + (t - (kThreads - kHaloPieces)));  // right halo
  }
#pragma unroll
  for (int i = 0; i < kCopies; ++i) copy(kHaloPieces + t + i * kThreads);  // center

  bar.arrive_and_wait();  // all arrivals + all bound copies complete: the tile is in buf
  stencil_store(buf, y, tile_start, n);
}
