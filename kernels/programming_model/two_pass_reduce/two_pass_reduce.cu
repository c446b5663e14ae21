// two_pass_reduce.cu: a full-array sum in two launches, because blocks of one grid cannot wait
// for each other. Pass 1 leaves one partial per block in global memory; the end of that
// launch is the grid-wide barrier; pass 2, a single block, folds the partials into the total.
//
// Both passes are the same template, reduce_sum<BLOCK>: a grid-stride loop (every block walks
// the whole array with stride gridDim.x * BLOCK float4s, so any grid size covers any n),
// followed by a block reduction (warp shuffles, then warp 0 over the per-warp sums). Only the
// launch shapes differ:
//   pass 1  two_pass_partials  grid = G blocks of 256 over x        -> partials[0 .. G)
//   pass 2  two_pass_final     grid = 1 block of 1024 over partials -> total[0]
// G is chosen on the host to fill the GPU exactly once (SMs x resident blocks per SM): more
// blocks than that only adds partials and block start-up, fewer leaves SMs idle.
//
// The input pointer must be 16-byte aligned (float4 loads); device allocations are.

#include <cstddef>

namespace {

constexpr int kUnroll = 4;  // independent float4 loads in flight per thread

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__device__ __forceinline__ void add4(float4& acc, const float4 v) {
  acc.x += v.x;
  acc.y += v.y;
  acc.z += v.z;
  acc.w += v.w;
}

// Sums x[0, n) over the whole grid; block b writes its share's sum to out[b].
template <int BLOCK>
__device__ __forceinline__ void reduce_sum(const float* __restrict__ x, float* __restrict__ out,
                                           int n) {
  static_assert(BLOCK % 32 == 0 && BLOCK <= 1024, "whole warps, at most 32 of them");
  constexpr int kWarps = BLOCK / 32;
  __shared__ float warp_partials[kWarps];

  const size_t n4 = static_cast<size_t>(n) / 4;
  const size_t stride = static_cast<size_t>(gridDim.x) * BLOCK;  // in float4s
  const size_t gtid = static_cast<size_t>(blockIdx.x) * BLOCK + threadIdx.x;
  const float4* x4 = reinterpret_cast<const float4*>(x);

  float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
  size_t i = gtid;
  for (; i + (kUnroll - 1) * stride < n4; i += kUnroll * stride) {
    float4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) v[u] = x4[i + u * stride];  // all issued before any add
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) add4(acc, v[u]);
  }
  for (; i < n4; i += stride) add4(acc, x4[i]);
  float v = (acc.x + acc.y) + (acc.z + acc.w);
  // At most three trailing elements; the first threads of the grid pick them up.
  if (gtid < static_cast<size_t>(n) - n4 * 4) v += x[n4 * 4 + gtid];

  // Block reduction: 32 -> 1 inside each warp, then warp 0 over kWarps per-warp sums.
  v = warp_sum(v);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) warp_partials[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float w = lane < kWarps ? warp_partials[lane] : 0.f;
    w = warp_sum(w);
    if (lane == 0) out[blockIdx.x] = w;
  }
}

}  // namespace

// Pass 1: grid = (G, 1, 1), block = (256, 1, 1); partials holds G floats.
extern "C" __global__ void __launch_bounds__(256)
    two_pass_partials(const float* __restrict__ x, float* __restrict__ partials, int n) {
  reduce_sum<256>(x, partials, n);
}

// Pass 2: grid = (1, 1, 1), block = (1024, 1, 1); reads the G partials pass 1 wrote. The
// launches are ordered on one stream, so pass 1's writes are complete and visible here.
extern "C" __global__ void __launch_bounds__(1024)
    two_pass_final(const float* __restrict__ partials, float* __restrict__ total, int count) {
  reduce_sum<1024>(partials, total, count);
}
