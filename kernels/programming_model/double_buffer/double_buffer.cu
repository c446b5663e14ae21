// double_buffer.cu: two shared-memory tiles per block; while the block computes on one, the
// next tile's global loads are already in flight for the other.
//
// Block r walks row r of a rows x len matrix in tiles of kTile floats and computes, per tile,
// a 3-point sum that stays inside the tile (neighbours outside the tile, or past the end of
// the row, count as zero):
//   y[r, t*kTile + i] = (s[i-1] + s[i]) + s[i+1],   s = tile t of row r, s[-1] = s[kTile] = 0
// A thread needs its neighbours' elements, so the tile goes through shared memory.
//
// The pipeline, with plain (synchronous) loads:
//   prologue:  load tile 0 -> buf[0]; __syncthreads()
//   step t:    issue the global loads of tile t+1 into REGISTERS    (in flight ...)
//              compute tile t from buf[t & 1] and store y            (... while this runs)
//              write the registers into buf[(t + 1) & 1]             (first use: waits here)
//              __syncthreads()
// One barrier per tile is enough. The write into buf[(t+1)&1] in step t cannot race with the
// reads of that buffer, which happened in step t-1, because the barrier ending step t-1 lies
// between them; and step t+1 reads it only after the barrier ending step t. With one buffer,
// the loads for t+1 could not be written before everyone finished reading tile t: a second
// barrier per tile and no overlap.
//
// Launch: grid = (rows, 1, 1), block = (kThreads, 1, 1), no dynamic shared memory.
// len must be a multiple of 4 (every row starts 16-byte aligned for float4 access).

#include <cstddef>

namespace {

constexpr int kThreads = 256;
constexpr int kVecPerThread = 2;                           // float4s per thread per tile
constexpr int kTile = kThreads * kVecPerThread * 4;        // 2048 floats = 8 KiB per buffer
constexpr int kTile4 = kTile / 4;

// Global -> registers for one tile: float4 v of thread tid is tile element 4 * (tid + v *
// kThreads). Past the row's end the registers hold zeros, so the buffer's tail reads as zero.
__device__ __forceinline__ void load_tile(float4 (&r)[kVecPerThread], const float4* row4,
                                          int tile, int len4) {
#pragma unroll
  for (int v = 0; v < kVecPerThread; ++v) {
    const int j = tile * kTile4 + threadIdx.x + v * kThreads;  // float4 index in the row
    r[v] = j < len4 ? row4[j] : make_float4(0.f, 0.f, 0.f, 0.f);
  }
}

__device__ __forceinline__ void store_tile(float4* buf4, const float4 (&r)[kVecPerThread]) {
#pragma unroll
  for (int v = 0; v < kVecPerThread; ++v) buf4[threadIdx.x + v * kThreads] = r[v];
}

}  // namespace

extern "C" __global__ void __launch_bounds__(kThreads)
    double_buffer_stencil3(const float* __restrict__ x, float* __restrict__ y, int len) {
  __shared__ float4 buf4[2][kTile4];  // the two tiles; float4 for 16-byte alignment

  const int len4 = len / 4;
  const int tiles = (len4 + kTile4 - 1) / kTile4;
  const size_t row_start = static_cast<size_t>(blockIdx.x) * static_cast<size_t>(len);
  const float4* row4 = reinterpret_cast<const float4*>(x + row_start);
  float4* out4 = reinterpret_cast<float4*>(y + row_start);

  float4 r[kVecPerThread];
  load_tile(r, row4, 0, len4);  // prologue: tile 0 into buffer 0
  store_tile(buf4[0], r);
  __syncthreads();

  for (int t = 0; t < tiles; ++t) {
    const bool has_next = t + 1 < tiles;  // the same for every thread: uniform branches
    if (has_next) load_tile(r, row4, t + 1, len4);  // issued now, consumed after the compute

    // Compute tile t from the current buffer. Zero-padding past the row's end makes the last
    // real element's right neighbour 0, as at every tile edge.
    const float4* cur4 = buf4[t & 1];
    const float* cur = reinterpret_cast<const float*>(cur4);
#pragma unroll
    for (int v = 0; v < kVecPerThread; ++v) {
      const int q = threadIdx.x + v * kThreads;  // float4 index within the tile
      const int j = t * kTile4 + q;              // float4 index within the row
      if (j < len4) {
        const float4 c = cur4[q];
        const float left = q > 0 ? cur[4 * q - 1] : 0.f;
        const float right = q + 1 < kTile4 ? cur[4 * q + 4] : 0.f;
        float4 o;
        o.x = (left + c.x) + c.y;
        o.y = (c.x + c.y) + c.z;
        o.z = (c.y + c.z) + c.w;
        o.w = (c.z + c.w) + right;
        out4[j] = o;
      }
    }

    // The loads issued above are needed only now; this store waits for them if they are still
    // in flight. The target buffer was last read in step t-1, before the previous barrier.
    if (has_next) store_tile(buf4[(t + 1) & 1], r);
    __syncthreads();
  }
}
