// thread_ids.cu: every thread reports who it is: (blockIdx.x, threadIdx.x, warp rank, lane).
//
// The hardware schedules a block as warps of 32 threads taken in order of the thread index:
// threads 0..31 form warp 0, 32..63 warp 1, and so on. So a thread's warp within its block is
// threadIdx.x / 32 and its position in that warp is threadIdx.x % 32. When blockDim.x is not a
// multiple of 32 the block's last warp is partial: it has blockDim.x % 32 threads (lanes
// 0..blockDim.x%32-1) and the missing lanes simply do not exist.
//
// The lane is read from the hardware register %laneid instead of being computed, so the test
// checks the rule above rather than restating it: %laneid == threadIdx.x % 32 holds only because
// warps really are built from 32 consecutive threads.
//
// Output: ids[t][0..3], t = blockIdx.x * blockDim.x + threadIdx.x, int32, one 16-byte row per
// thread (a single int4 store). Launch: any 1-D grid and 1-D block; the output has exactly
// gridDim.x * blockDim.x rows, so every thread writes and none needs a bounds check.

#include <cstddef>

namespace {

__device__ __forceinline__ unsigned hw_lane_id() {
  unsigned lane;
  asm volatile("mov.u32 %0, %%laneid;" : "=r"(lane));
  return lane;
}

}  // namespace

extern "C" __global__ void thread_ids(int4* __restrict__ ids) {
  const size_t t = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  ids[t] = make_int4(static_cast<int>(blockIdx.x), static_cast<int>(threadIdx.x),
                     static_cast<int>(threadIdx.x / 32), static_cast<int>(hw_lane_id()));
}
