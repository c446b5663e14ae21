// stencil_sync.cu: radius-8 1-D stencil, tile + halos staged in shared memory with plain loads.
//
// The stencil, its weights and the shared-memory layout (left halo | center | right halo) are in
// ../stencil.cuh, which all three stencil kernels share; this file is about filling the buffer.
//
// Every piece is a whole number of 16-byte chunks and tile_start is a multiple of 4 floats, so
// each chunk is one aligned float4 in both global and shared memory. Chunks that straddle n or lie
// outside [0, n) (only in the first and last block) are filled element by element with zeros for
// the missing elements.
//
// This is the SYNCHRONOUS baseline of the chapter: the copy goes global -> register -> shared, and
// because the halo loads sit in branches, the compiler tends to emit LDG, wait, STS per branch
// instead of issuing every LDG first. The memcpy_async versions (stencil_memcpy_async_thread /
// _block) copy the same layout without the register round trip.
//
// Launch: grid = (ceil(n / kTile), 1, 1), block = (kThreads, 1, 1), no dynamic shared memory.

#include <cstdint>

#include "../stencil.cuh"

namespace {

constexpr int kHaloChunks = kRadius / 4;  // float4 chunks per halo
constexpr int kCenterChunks = kTile / 4;

static_assert(kCenterChunks % kThreads == 0, "each thread owns the same number of chunks");
static_assert(kHaloChunks <= kThreads / 2, "halo loaders must be distinct threads");

// Chunk starting at global index g when it is not entirely inside [0, n): zero padding.
__device__ __forceinline__ float4 load_chunk_guarded(const float* __restrict__ x, int64_t g,
                                                     int n) {
  float e[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) e[j] = (g + j >= 0 && g + j < n) ? x[g + j] : 0.0f;
  return make_float4(e[0], e[1], e[2], e[3]);
}

}  // namespace

extern "C" __global__ void __launch_bounds__(kThreads)
    stencil_sync(const float* __restrict__ x, float* __restrict__ y, int n) {
  __shared__ alignas(16) float buf[kBuf];
  float4* b4 = reinterpret_cast<float4*>(buf);

  const int t = static_cast<int>(threadIdx.x);
  const int64_t tile_start = static_cast<int64_t>(blockIdx.x) * kTile;
  const int64_t g0 = tile_start - kRadius;  // global index of buf[0]

  // Chunk c of buf: one float4 through registers. Interior chunks are a single 16-byte load.
  auto load = [&](int c) {
    const int64_t g = g0 + 4 * static_cast<int64_t>(c);
    b4[c] = (g >= 0 && g + 4 <= n) ? *reinterpret_cast<const float4*>(x + g)
                                   : load_chunk_guarded(x, g, n);
  };

  // The chapter's conditional loads: a few threads fetch the halos, everyone fetches the center.
  if (t < kHaloChunks) {
    load(t);  // left halo
  } else if (t >= kThreads - kHaloChunks) {
    load(kHaloChunks + kCenterChunks + (t - (kThreads - kHaloChunks)));  // right halo
  }
#pragma unroll
  for (int i = 0; i < kGroups; ++i) load(kHaloChunks + t + i * kThreads);  // center

  __syncthreads();  // every thread reads chunks that other threads stored
  stencil_store(buf, y, tile_start, n);
}
