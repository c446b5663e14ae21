// stencil.cuh: the radius-8 1-D stencil that stencil_sync, stencil_memcpy_async_thread and
// stencil_memcpy_async_block compute once their tile is in shared memory. The three kernels
// differ only in how the tile gets there; this is the part they share.
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

#pragma once

#include <cstdint>

constexpr int kRadius = 8;
constexpr int kThreads = 256;
constexpr int kTile = 2048;  // outputs per block: 8 per thread, as two groups of 4
constexpr int kBuf = kRadius + kTile + kRadius;
constexpr int kGroups = kTile / 4 / kThreads;  // float4 output groups per thread

static_assert(kRadius % 4 == 0 && kTile % 4 == 0, "halo and tile must be whole float4 chunks");
static_assert((kTile / 4) % kThreads == 0, "each thread owns the same number of outputs");

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
