// stencil_sync.cu: radius-8 1-D stencil, tile + halos staged in shared memory with plain loads.
//
// y[i] = sum_{k=-8..8} w_k * x[i + k],  w_k = (k + 9) / 256  (1/256 ... 17/256; exact in fp32),
// with x[j] = 0 outside [0, n) (zero padding). The weights are deliberately asymmetric so that a
// halo placed one chunk off, or a mirrored window, changes the answer.
//
// Shared-memory layout per block, the chapter's "left halo 8 | center 32 | right halo 8" with the
// center widened to kTile = 2048 outputs so a block moves enough bytes to matter:
//
//   buf[0 .. 8)            x[tile_start - 8 .. tile_start)          left halo
//   buf[8 .. 8 + kTile)    x[tile_start .. tile_start + kTile)      center
//   buf[8 + kTile .. +8)   x[tile_start + kTile .. + 8)             right halo
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

namespace {

constexpr int kRadius = 8;
constexpr int kThreads = 256;
constexpr int kTile = 2048;  // outputs per block: 8 per thread, as two groups of 4
constexpr int kBuf = kRadius + kTile + kRadius;
constexpr int kHaloChunks = kRadius / 4;  // float4 chunks per halo
constexpr int kCenterChunks = kTile / 4;
constexpr int kGroups = kCenterChunks / kThreads;  // float4 output groups per thread

static_assert(kRadius % 4 == 0 && kTile % 4 == 0, "halo and tile must be whole float4 chunks");
static_assert(kCenterChunks % kThreads == 0, "each thread owns the same number of chunks");
static_assert(kHaloChunks <= kThreads / 2, "halo loaders must be distinct threads");

// w_k for k = m - kRadius, m = 0..16: (m + 1) / 256, a compile-time immediate after unrolling.
__device__ __forceinline__ constexpr float weight(int m) {
  return static_cast<float>(m + 1) * (1.0f / 256.0f);
}

// Chunk starting at global index g when it is not entirely inside [0, n): zero padding.
__device__ __forceinline__ float4 load_chunk_guarded(const float* __restrict__ x, int64_t g,
                                                     int n) {
  float e[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) e[j] = (g + j >= 0 && g + j < n) ? x[g + j] : 0.0f;
  return make_float4(e[0], e[1], e[2], e[3]);
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
