// cub_block_sum.cu: one partial sum per block of a 1024-element tile, the block's reduction left
// to CUB. sums[b] = sum(x[b * 1024, min((b + 1) * 1024, n))); no atomics, so the result does not
// depend on the order blocks finish in.
//
// cub::BlockReduce is a class template over (element type, threads per block): the block size
// must be a compile-time constant so CUB can size its shared storage and pick its warp-level
// algorithm. The launch must therefore use exactly kThreads threads per block.
//
// Launch: grid = (ceil(n / kTile), 1, 1), block = (kThreads, 1, 1), no dynamic shared memory.

#include <cub/block/block_reduce.cuh>

constexpr int kThreads = 256;
constexpr int kItems = 4;  // elements per thread: a tile of 1024
constexpr int kTile = kThreads * kItems;

extern "C" __global__ void __launch_bounds__(kThreads)
    cub_block_sum(const float* __restrict__ x, float* __restrict__ sums, int n) {
  using BlockReduce = cub::BlockReduce<float, kThreads>;
  // CUB does not allocate: the caller provides its scratch, here as static shared memory.
  __shared__ typename BlockReduce::TempStorage scratch;

  const long long base = static_cast<long long>(blockIdx.x) * kTile;
  // Each thread folds its kItems first, striding by kThreads so a warp's loads stay contiguous.
  // Elements past n (only in the last tile) count as 0, the sum's identity.
  float partial = 0.0f;
#pragma unroll
  for (int k = 0; k < kItems; ++k) {
    const long long i = base + k * kThreads + threadIdx.x;
    if (i < n) partial += x[i];
  }

  // Every thread of the block must call Sum (it synchronises internally); only thread 0 gets
  // the block's total, the others' return values are undefined.
  const float total = BlockReduce(scratch).Sum(partial);
  if (threadIdx.x == 0) sums[blockIdx.x] = total;
}
