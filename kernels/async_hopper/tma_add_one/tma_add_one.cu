// tma_add_one.cu: y = x + 1 on a 2-D float32 tensor, one TMA box per block.
//
// The Tensor Memory Accelerator (TMA, sm_90+) moves a whole multi-dimensional box between
// global and shared memory from a single instruction issued by one thread. The hardware does
// the address arithmetic and the bounds handling: a load zero-fills the parts of the box that
// fall outside the tensor, and a store drops them. Completion of a load is reported to an
// mbarrier in shared memory, which counts bytes (its "transaction count") as well as arrivals.
//
// Per block:
//   1. thread 0 initialises the mbarrier (one expected arrival) and fences the init;
//   2. thread 0 arms the barrier with the box's byte count and issues the TMA load of x;
//   3. every thread waits for phase 0 of the barrier to complete (parity 0);
//   4. every thread adds 1.0f to its share of the tile in shared memory;
//   5. proxy fence + __syncthreads, then thread 0 issues the TMA store into y, commits the
//      bulk group and waits until the TMA engine has finished reading shared memory.
//
// Launch: grid = (ceil(cols / kBoxCols), ceil(rows / kBoxRows), 1) blocks,
// block = (kThreads, 1, 1), no dynamic shared memory, no cluster (a cluster of one).
// Two tensor maps, built on the host with box = (kBoxRows, kBoxCols) in (rows, cols) order,
// no swizzle, zero OOB fill: tmap_x over the input, tmap_y over the output.
// The tensor map's row stride (cols * 4 bytes) must be a multiple of 16, so cols % 4 == 0.

#include <cuda.h>  // CUtensorMap
#include <cstdint>

#include "../mbarrier_tma.cuh"

namespace {

constexpr int kBoxRows = 64;
constexpr int kBoxCols = 64;  // 64 floats = 256 bytes per box row: a multiple of 16 as TMA requires
constexpr int kThreads = 128;
constexpr uint32_t kBoxBytes = kBoxRows * kBoxCols * sizeof(float);  // 16 KiB

static_assert(kBoxRows <= 256 && kBoxCols <= 256, "TMA box dimensions are limited to 256");
static_assert((kBoxCols * sizeof(float)) % 16 == 0, "TMA box rows must be a multiple of 16 bytes");
static_assert((kBoxRows * kBoxCols) % (4 * kThreads) == 0, "float4 loop assumes an even split");

}  // namespace

extern "C" __global__ void __launch_bounds__(kThreads)
    tma_add_one(const __grid_constant__ CUtensorMap tmap_x,
                const __grid_constant__ CUtensorMap tmap_y) {
  // TMA without swizzle needs a 16-byte aligned shared destination; 128 is what swizzled
  // layouts need and costs nothing here.
  __shared__ alignas(128) float tile[kBoxRows * kBoxCols];
  __shared__ alignas(8) uint64_t bar;

  const int32_t col0 = static_cast<int32_t>(blockIdx.x) * kBoxCols;
  const int32_t row0 = static_cast<int32_t>(blockIdx.y) * kBoxRows;
  const bool leader = threadIdx.x == 0;

  if (leader) {
    mbar_init(&bar, 1);  // one arrival: the leader's arrive.expect_tx below
    fence_proxy_async_smem();  // the TMA engine must see an initialised barrier
  }
  __syncthreads();  // ... and so must the other threads before they start waiting on it

  if (leader) {
    // Arm first, then issue: the phase cannot complete until the arrival count reaches zero
    // AND all kBoxBytes bytes (including zero-filled out-of-bounds ones) have landed.
    mbar_arrive_expect_tx(&bar, kBoxBytes);
    tma_load_2d(tile, &tmap_x, col0, row0, &bar);
  }
  // A fresh barrier is in phase 0; waiting on parity 0 returns once that phase has completed,
  // i.e. once the tile is in shared memory. (A loop reusing the barrier would flip the parity.)
  mbar_wait_parity(&bar, 0);

  // Each thread updates 16-byte chunks; consecutive threads touch consecutive chunks, so the
  // shared-memory accesses are conflict-free.
  float4* t4 = reinterpret_cast<float4*>(tile);
#pragma unroll
  for (int i = threadIdx.x; i < kBoxRows * kBoxCols / 4; i += kThreads) {
    float4 v = t4[i];
    v.x += 1.0f;
    v.y += 1.0f;
    v.z += 1.0f;
    v.w += 1.0f;
    t4[i] = v;
  }

  // Every writer fences its own generic-proxy writes toward the async proxy, then the block
  // synchronises so the leader issues the store only after all writes are fenced.
  fence_proxy_async_smem();
  __syncthreads();

  if (leader) {
    tma_store_2d(&tmap_y, col0, row0, tile);
    bulk_commit_and_wait_read();
  }
  // The barrier is not reused, so it needs no mbarrier.inval before the block exits.
}
