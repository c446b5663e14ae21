// tcgen05_gemm.cu: C = A * B in bf16 with fp32 accumulation, the Blackwell way (sm_100a only).
//
// Layouts are wgmma_ws_gemm's, for the same reason: A is M x K row-major and B is given as
// N x K row-major, so both operands are K-major (each tile row is a run of K values), the form
// the tensor cores read from shared memory without a transpose and cuBLAS's "TN". C is M x N
// row-major bf16.
//
// What changes from Hopper to Blackwell, and what this kernel shows:
//   - The accumulator no longer lives in registers. It lives in Tensor Memory (TMEM), 256 KB per
//     SM laid out as 128 lanes x 512 columns of 32 bits, which a block must allocate
//     (tcgen05.alloc), hand back (tcgen05.dealloc) and read into registers explicitly
//     (tcgen05.ld). A 128 x 256 fp32 tile takes 256 columns of all 128 lanes: row i of the
//     tile is lane i, column j is column j.
//   - One thread issues the MMA (tcgen05.mma), not a warpgroup: the tensor core reads both
//     operands from shared memory through descriptors and accumulates into TMEM on its own,
//     so there is no register pressure to trade (no setmaxnreg).
//   - Completion is tracked by an mbarrier: tcgen05.commit makes a barrier arrive once every
//     MMA this thread issued before it has finished. The same mechanism hands a shared-memory
//     stage back to the TMA producer and tells the epilogue the accumulator is complete.
//
// The block is 4 warps (128 threads):
//   - warp 0, lane 0: the TMA producer, filling a ring of kStages stages of A and B tiles;
//   - warp 1, lane 0: the MMA issuer, 4 tcgen05.mma (K = 16 each) per 64-wide k-tile;
//   - all 4 warps: the epilogue. A warp may only touch its own quarter of TMEM's lanes (warp w:
//     lanes 32w..32w+31), which is why the epilogue is exactly 4 warps of 32 rows each.
// Barriers per stage: `full` completes when the TMA engine has written the stage's bytes,
// `empty` when the MMAs reading it have finished (tcgen05.commit); `done` completes when the
// last MMA has. Each block computes one 128 x 256 tile of C.
//
// Launch: grid = (ceil(M/128) * ceil(N/256), 1, 1), block = (128, 1, 1), kSmemBytes of dynamic
// shared memory. Tensor maps over A (box 128 x 64) and B (box 256 x 64), bf16, 128-byte swizzle,
// zero out-of-bounds fill. Needs K % 8 == 0 (TMA row strides are multiples of 16 bytes) and
// N % 2 == 0 (C is written two bf16 at a time).
//
// Compiled and inspected only: no CC 10.0 GPU has run it (see the spec).

#include <cuda.h>  // CUtensorMap
#include <cuda_bf16.h>
#include <cstdint>

#include "../mbarrier_tma.cuh"

namespace {

constexpr int kBM = 128;  // tile rows: the MMA's M, one TMEM lane per row
constexpr int kBN = 256;  // tile columns: the MMA's N, one TMEM column per fp32 column
constexpr int kBK = 64;   // 64 bf16 = 128 bytes, exactly one 128-byte swizzle row
constexpr int kUmmaK = 16;  // K of one tcgen05.mma.kind::f16
constexpr int kStages = 4;
constexpr int kThreads = 128;
constexpr uint32_t kTmemColumns = 256;  // a power of two >= 32, as tcgen05.alloc demands

constexpr uint32_t kTileABytes = kBM * kBK * 2;
constexpr uint32_t kTileBBytes = kBN * kBK * 2;
constexpr uint32_t kStageBytes = kTileABytes + kTileBBytes;  // 48 KiB
// Tiles need 1024-byte alignment (the 128-byte swizzle repeats every 8 rows); the dynamic
// shared memory base promises 16. Barriers and the TMEM address follow the stages.
constexpr uint32_t kSmemBytes = 1024 + kStages * kStageBytes + (2 * kStages + 1) * 8 + 16;

static_assert(kSmemBytes <= 227 * 1024, "beyond sm_100's 227 KiB of shared memory per block");
static_assert(kBK * 2 == 128, "one k-tile row must be one 128-byte swizzle row");

// ---- descriptors -------------------------------------------------------------------------

// The shared-memory matrix descriptor of sm_100 (PTX ISA, "Matrix descriptors" of tcgen05):
// bits 0-13 start address >> 4, 16-29 leading byte offset >> 4, 32-45 stride byte offset >> 4,
// 46-47 version (1 on sm_100), 49-51 base offset (0: the tile is 1024-byte aligned), 52 LBO
// mode, 61-63 swizzle (2: 128-byte). A K-major 128B-swizzled tile is a column of 8-row x 128 B
// atoms: the stride byte offset is the atom pitch, 1024 B; the leading offset is unused. As on
// Hopper, the next K = 16 slice of a 128-byte row is +32 bytes on the start address, the
// hardware applying the same XOR swizzle TMA wrote the tile with.
__device__ __forceinline__ uint64_t smem_desc(const void* tile) {
  const uint64_t addr = smem_addr(tile);
  uint64_t desc = (addr & 0x3FFFF) >> 4;  // start address
  desc |= uint64_t(16 >> 4) << 16;        // leading byte offset (ignored when swizzled)
  desc |= uint64_t(1024 >> 4) << 32;      // stride byte offset: one 8 x 128 B atom
  desc |= uint64_t(1) << 46;              // version 1: the tcgen05 descriptor
  desc |= uint64_t(2) << 61;              // 128-byte swizzle
  return desc;
}

// The instruction descriptor of tcgen05.mma.kind::f16 (PTX ISA, "Instruction descriptor"):
// bits 4-5 D format (1: f32), 7-9 A format and 10-12 B format (1: bf16), 15 and 16 A and B
// major-ness (0: K-major), 17-22 N >> 3, 24-28 M >> 4. Dense, no negation, no saturation.
constexpr uint32_t kInstrDesc = (1u << 4) | (1u << 7) | (1u << 10) | (uint32_t(kBN >> 3) << 17) |
                                (uint32_t(kBM >> 4) << 24);

// ---- Tensor Memory -----------------------------------------------------------------------

// Allocate `columns` TMEM columns for this CTA; a whole warp executes it, and the TMEM address
// (lane 0, first column) lands in shared memory at `dst`. Relinquishing the permit right after
// tells the hardware this CTA allocates nothing more, so another CTA on the SM may.
__device__ __forceinline__ void tmem_alloc(uint32_t* dst, uint32_t columns) {
  asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], %1;" ::"r"(
                   smem_addr(dst)),
               "r"(columns)
               : "memory");
  asm volatile("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;" ::: "memory");
}

// Hand the columns back; the same warp that allocated them, once nobody reads them any more.
__device__ __forceinline__ void tmem_dealloc(uint32_t taddr, uint32_t columns) {
  asm volatile("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, %1;" ::"r"(taddr), "r"(columns)
               : "memory");
}

// tcgen05 operations are asynchronous to the issuing thread. These fences order them against a
// thread synchronization (a __syncthreads or an mbarrier wait): "before" on the side that
// signals, "after" on the side that waits, so TMEM accesses do not cross the sync point.
__device__ __forceinline__ void tcgen05_fence_before_sync() {
  asm volatile("tcgen05.fence::before_thread_sync;" ::: "memory");
}
__device__ __forceinline__ void tcgen05_fence_after_sync() {
  asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory");
}

// D[tmem] (+)= A[smem] * B[smem]^T for one 128 x 256 x 16 step, issued by one thread.
// `accumulate` false overwrites D: the first step of a tile needs no zeroed accumulator.
__device__ __forceinline__ void umma_bf16(uint32_t d_tmem, uint64_t a_desc, uint64_t b_desc,
                                          bool accumulate) {
  asm volatile(
      "{\n\t.reg .pred acc;\n\t"
      "setp.ne.b32 acc, %4, 0;\n\t"
      "tcgen05.mma.cta_group::1.kind::f16 [%0], %1, %2, %3, acc;\n\t}" ::"r"(d_tmem),
      "l"(a_desc), "l"(b_desc), "r"(kInstrDesc), "r"(uint32_t(accumulate))
      : "memory");
}

// Make `bar` arrive once all tcgen05.mma this thread issued so far have completed (and so have
// finished reading their shared-memory operands and writing TMEM).
__device__ __forceinline__ void umma_commit(uint64_t* bar) {
  asm volatile(
      "tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%0];" ::"r"(
          smem_addr(bar))
      : "memory");
}

// 32 consecutive TMEM columns of this warp's 32 lanes into registers: thread t gets lane
// (lane base + t), columns col..col+31. The registers are valid only after tmem_wait_load().
__device__ __forceinline__ void tmem_load_32cols(uint32_t taddr, uint32_t (&r)[32]) {
  asm volatile(
      "tcgen05.ld.sync.aligned.32x32b.x32.b32 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, [%32];"
      : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]), "=r"(r[4]), "=r"(r[5]), "=r"(r[6]),
        "=r"(r[7]), "=r"(r[8]), "=r"(r[9]), "=r"(r[10]), "=r"(r[11]), "=r"(r[12]), "=r"(r[13]),
        "=r"(r[14]), "=r"(r[15]), "=r"(r[16]), "=r"(r[17]), "=r"(r[18]), "=r"(r[19]),
        "=r"(r[20]), "=r"(r[21]), "=r"(r[22]), "=r"(r[23]), "=r"(r[24]), "=r"(r[25]),
        "=r"(r[26]), "=r"(r[27]), "=r"(r[28]), "=r"(r[29]), "=r"(r[30]), "=r"(r[31])
      : "r"(taddr)
      : "memory");
}

__device__ __forceinline__ void tmem_wait_load() {
  asm volatile("tcgen05.wait::ld.sync.aligned;" ::: "memory");
}

}  // namespace

extern "C" __global__ void __launch_bounds__(kThreads, 1)
    tcgen05_gemm(const __grid_constant__ CUtensorMap tmap_a,
                 const __grid_constant__ CUtensorMap tmap_b, __nv_bfloat16* __restrict__ c,
                 int m, int n, int k) {
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
  __nv_bfloat16* tiles_a = reinterpret_cast<__nv_bfloat16*>(smem);
  __nv_bfloat16* tiles_b = reinterpret_cast<__nv_bfloat16*>(smem + kStages * kTileABytes);
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + kStages * kStageBytes);
  uint64_t* empty = full + kStages;
  uint64_t* done = empty + kStages;
  uint32_t* tmem_base_slot = reinterpret_cast<uint32_t*>(done + 1);

  const int tiles_n = (n + kBN - 1) / kBN;
  const int tile_m = blockIdx.x / tiles_n;
  const int tile_n = blockIdx.x % tiles_n;
  const int k_tiles = (k + kBK - 1) / kBK;
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;

  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbar_init(&full[s], 1);   // the producer's arrive.expect_tx
      mbar_init(&empty[s], 1);  // the MMA issuer's tcgen05.commit
    }
    mbar_init(done, 1);
    fence_mbarrier_init();
    fence_proxy_async_smem();
  }
  if (warp == 0) {
    __syncwarp();  // tcgen05.alloc is .sync.aligned: the whole warp, converged, after lane 0's init
    tmem_alloc(tmem_base_slot, kTmemColumns);
  }
  // The allocation is a tcgen05 operation like any other: fence it around the block barrier
  // before other threads use the address it wrote.
  tcgen05_fence_before_sync();
  __syncthreads();
  tcgen05_fence_after_sync();
  const uint32_t tmem_d = *tmem_base_slot;

  if (warp == 0 && lane == 0) {
    // Producer: as in wgmma_ws_gemm, run up to kStages k-tiles ahead of the MMAs.
    for (int kt = 0; kt < k_tiles; ++kt) {
      const int s = kt % kStages;
      mbar_wait_parity(&empty[s], ((kt / kStages) & 1) ^ 1);  // round 0 passes at once
      mbar_arrive_expect_tx(&full[s], kStageBytes);
      // Boxes past the tensor's edge arrive zero-filled and count toward the bytes: the k tail
      // and the M/N edges need no special case.
      tma_load_2d(tiles_a + s * kBM * kBK, &tmap_a, kt * kBK, tile_m * kBM, &full[s]);
      tma_load_2d(tiles_b + s * kBN * kBK, &tmap_b, kt * kBK, tile_n * kBN, &full[s]);
    }
    // Producer tail: wait for the commits of the last round of stages too. A commit's arrive
    // lands on this block's shared memory when its MMAs finish; the block must not exit (and
    // hand that memory to the next block on this SM) with one still in flight. A stage never
    // used (k_tiles < kStages) is in round 0, whose wait passes at once.
    for (int kt = k_tiles; kt < k_tiles + kStages; ++kt) {
      mbar_wait_parity(&empty[kt % kStages], ((kt / kStages) & 1) ^ 1);
    }
  } else if (warp == 1 && lane == 0) {
    // MMA issuer: one thread drives the tensor core for the whole tile.
    for (int kt = 0; kt < k_tiles; ++kt) {
      const int s = kt % kStages;
      mbar_wait_parity(&full[s], (kt / kStages) & 1);
      tcgen05_fence_after_sync();  // the MMAs below follow the wait, in the tcgen05 order too
      const __nv_bfloat16* a = tiles_a + s * kBM * kBK;
      const __nv_bfloat16* b = tiles_b + s * kBN * kBK;
#pragma unroll
      for (int kk = 0; kk < kBK / kUmmaK; ++kk) {
        umma_bf16(tmem_d, smem_desc(a + kk * kUmmaK), smem_desc(b + kk * kUmmaK),
                  kt > 0 || kk > 0);
      }
      umma_commit(&empty[s]);  // the stage is free once these MMAs have read it
    }
    umma_commit(done);  // and the accumulator is complete once the last of them has finished
  }

  // Epilogue, all four warps: warp w owns TMEM lanes 32w..32w+31, i.e. tile rows 32w..32w+31;
  // thread t of the warp writes row 32w + t, 32 columns at a time.
  mbar_wait_parity(done, 0);
  __syncwarp();  // tcgen05.ld is .sync.aligned: the producer and issuer lanes rejoin their warps
  tcgen05_fence_after_sync();
  const int row = tile_m * kBM + warp * 32 + lane;
  const uint32_t lane_base = uint32_t(warp * 32) << 16;  // TMEM address: lane << 16 | column
#pragma unroll 1
  for (int chunk = 0; chunk < kBN; chunk += 32) {
    uint32_t r[32];
    tmem_load_32cols(tmem_d + lane_base + uint32_t(chunk), r);
    tmem_wait_load();
    const int col0 = tile_n * kBN + chunk;
    if (row < m) {
#pragma unroll
      for (int j = 0; j < 32; j += 2) {
        const int col = col0 + j;  // even, and N is even: a pair is all in or all out
        if (col < n) {
          *reinterpret_cast<__nv_bfloat162*>(c + size_t(row) * n + col) =
              __floats2bfloat162_rn(__uint_as_float(r[j]), __uint_as_float(r[j + 1]));
        }
      }
    }
  }

  // Everyone has read the accumulator before warp 0 hands its columns back.
  tcgen05_fence_before_sync();
  __syncthreads();
  if (warp == 0) {
    tcgen05_fence_after_sync();
    tmem_dealloc(tmem_d, kTmemColumns);
  }
}
