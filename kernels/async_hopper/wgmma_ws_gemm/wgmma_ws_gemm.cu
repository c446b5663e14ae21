// wgmma_ws_gemm.cu: C = A * B in bf16 with fp32 accumulation, the Hopper way (sm_90a only).
//
// A is M x K row-major; B is given as N x K row-major (B column-major), so that both operands
// are "K-major": each row of either tile is a run of K values. That is the layout wgmma reads
// without transposing and the one cuBLAS calls "TN". C is M x N row-major bf16.
//
// The block is three warpgroups (3 x 128 threads) with different jobs, which is what "warp
// specialization" means:
//   - warpgroup 0, the producer: one thread issues TMA loads of the A and B tiles into a ring of
//     kStages shared-memory stages. It needs almost no registers, so it gives them away
//     (setmaxnreg.dec) to
//   - warpgroups 1 and 2, the consumers: each owns 64 of the tile's 128 rows and issues
//     wgmma.mma_async m64n256k16 on the shared-memory tiles, holding its 64 x 256 fp32
//     accumulator in registers (128 per thread, hence setmaxnreg.inc).
// Two mbarriers per stage hand it over: `full` completes when the TMA engine has written the
// stage's bytes, `empty` when every consumer warp is done reading it. The producer runs up to
// kStages tiles ahead, so loads of later k-tiles overlap the tensor-core work on this one.
//
// Launch: grid = (ceil(M/128) * ceil(N/256), 1, 1), block = (384, 1, 1), kSmemBytes of
// dynamic shared memory. Tensor maps over A (box 128 x 64) and B (box 256 x 64), bf16,
// 128-byte swizzle, zero out-of-bounds fill. Needs K % 8 == 0 (TMA row strides are multiples
// of 16 bytes) and N % 2 == 0 (C is written two bf16 at a time).

#include <cuda.h>  // CUtensorMap
#include <cuda_bf16.h>
#include <cstdint>

#include "../mbarrier_tma.cuh"

namespace {

constexpr int kBM = 128;  // tile rows: 2 consumer warpgroups x wgmma's M of 64
constexpr int kBN = 256;  // tile columns: wgmma's largest N
constexpr int kBK = 64;   // 64 bf16 = 128 bytes, exactly one 128-byte swizzle row
constexpr int kStages = 4;
constexpr int kConsumers = 2;
constexpr int kThreads = 128 * (1 + kConsumers);
constexpr int kGroupM = 16;  // tile rows scheduled together, so a wave shares A and B in L2

constexpr uint32_t kTileABytes = kBM * kBK * 2;
constexpr uint32_t kTileBBytes = kBN * kBK * 2;
constexpr uint32_t kStageBytes = kTileABytes + kTileBBytes;  // 48 KiB
// The tiles need 1024-byte alignment (the swizzle pattern repeats every 8 rows of 128 bytes);
// the dynamic shared memory base only promises 16, so one extra KiB lets us align by hand.
constexpr uint32_t kSmemBytes = 1024 + kStages * kStageBytes + 2 * kStages * 8;

static_assert(kSmemBytes <= 227 * 1024, "beyond sm_90's 227 KiB of shared memory per block");
static_assert(kBK * 2 == 128, "one k-tile row must be one 128-byte swizzle row");

// ---- wgmma -------------------------------------------------------------------------------

// A shared-memory matrix descriptor: where a K-major tile starts and how it is laid out.
// With 128-byte swizzle the tile is a column of 8-row x 128-byte "atoms"; the stride byte
// offset (SBO) is the distance between atoms, 1024 bytes. The leading byte offset is unused
// for swizzled K-major tiles. Moving to the next k16 slice inside the 128-byte row is just
// +32 bytes on the start address: the hardware applies the swizzle to the final address, the
// same XOR pattern TMA used when it wrote the tile.
__device__ __forceinline__ uint64_t smem_desc(const void* tile) {
  const uint64_t addr = smem_addr(tile);
  uint64_t desc = (addr & 0x3FFFF) >> 4;  // start address, in 16-byte units
  desc |= uint64_t(16 >> 4) << 16;        // leading byte offset (ignored here)
  desc |= uint64_t(1024 >> 4) << 32;      // stride byte offset: one 8 x 128 B atom
  desc |= uint64_t(1) << 62;              // layout: 128-byte swizzle
  return desc;
}

// Orders this warpgroup's register and shared-memory accesses before the wgmmas that follow.
__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
// Waits until at most `kPending` committed wgmma groups of this warpgroup are still running.
template <int kPending>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(kPending) : "memory");
}

// Tells the compiler that `r` may change here, so no read of an accumulator is moved above a
// wgmma_wait: the registers are written by the tensor cores behind the compiler's back.
__device__ __forceinline__ void fence_operand(float& r) { asm volatile("" : "+f"(r)::"memory"); }

// d[64 x 256] += A[64 x 16] * B[16 x 256], both from shared memory, issued by the whole
// warpgroup. Thread t of the warpgroup holds rows 16 * (t / 32) + (t % 32) / 4 (+ 8) and two
// adjacent columns of every 8-column group: d[4j + {0,1}] at row r, columns 8j + 2(t % 4) + {0,1};
// d[4j + {2,3}] at row r + 8.
__device__ __forceinline__ void wgmma_m64n256k16(float (&d)[128], uint64_t desc_a,
                                                 uint64_t desc_b) {
  asm volatile(
      "{\n.reg .pred accumulate;\nsetp.ne.b32 accumulate, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
      "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
      "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
      "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
      "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, "
      "%128, %129, accumulate, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
        "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
        "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
        "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
        "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
        "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
        "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
        "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
        "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
      : "l"(desc_a), "l"(desc_b));
}

}  // namespace

extern "C" __global__ void __launch_bounds__(kThreads, 1)
    wgmma_ws_gemm(const __grid_constant__ CUtensorMap tmap_a,
                  const __grid_constant__ CUtensorMap tmap_b, __nv_bfloat16* __restrict__ c,
                  int m, int n, int k) {
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
  __nv_bfloat16* tiles_a = reinterpret_cast<__nv_bfloat16*>(smem);
  __nv_bfloat16* tiles_b = reinterpret_cast<__nv_bfloat16*>(smem + kStages * kTileABytes);
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + kStages * kStageBytes);
  uint64_t* empty = full + kStages;

  // Grouped tile order: consecutive blocks walk down kGroupM tile rows before moving right, so
  // the blocks resident at one time read a compact patch of A and B that L2 can hold.
  const int tiles_m = (m + kBM - 1) / kBM;
  const int tiles_n = (n + kBN - 1) / kBN;
  const int per_group = kGroupM * tiles_n;
  const int group = blockIdx.x / per_group;
  const int first_m = group * kGroupM;
  const int group_rows = min(tiles_m - first_m, kGroupM);
  const int tile_m = first_m + (blockIdx.x % per_group) % group_rows;
  const int tile_n = (blockIdx.x % per_group) / group_rows;
  const int k_tiles = (k + kBK - 1) / kBK;

  const int warpgroup = threadIdx.x / 128;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbar_init(&full[s], 1);                    // the producer's arrive.expect_tx
      mbar_init(&empty[s], kConsumers * 4);      // one arrival per consumer warp
    }
    // Make the initialised barriers visible to the TMA engine (the async proxy) too.
    fence_mbarrier_init();
    fence_proxy_async_smem();
  }
  __syncthreads();

  if (warpgroup == 0) {
    // Producer. 40 registers per thread are plenty to count tiles and issue copies.
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
    if (threadIdx.x == 0) {
      for (int kt = 0; kt < k_tiles; ++kt) {
        const int s = kt % kStages;
        // Round r of stage s needs the consumers' release of round r - 1. A fresh barrier
        // counts as having completed the phase before phase 0, so round 0 passes at once.
        mbar_wait_parity(&empty[s], ((kt / kStages) & 1) ^ 1);
        mbar_arrive_expect_tx(&full[s], kStageBytes);
        // Coordinates are (k, row). A box reaching past the tensor's edge is zero-filled and
        // those zeros count toward the barrier's bytes like real ones: the k tail and the M/N
        // edges need no special case, zeros add nothing to a dot product.
        tma_load_2d(tiles_a + s * kBM * kBK, &tmap_a, kt * kBK, tile_m * kBM, &full[s]);
        tma_load_2d(tiles_b + s * kBN * kBK, &tmap_b, kt * kBK, tile_n * kBN, &full[s]);
      }
    }
  } else {
    // Consumers: 128 accumulators plus addressing need more than the 168 registers per thread
    // that 384 threads could have evenly; 128 x 40 + 256 x 232 fits the SM's 64K.
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
    const int half = warpgroup - 1;  // which 64 rows of the tile this warpgroup computes
    const bool warp_leader = threadIdx.x % 32 == 0;
    float d[128];
#pragma unroll
    for (int i = 0; i < 128; ++i) d[i] = 0.0f;

    for (int kt = 0; kt < k_tiles; ++kt) {
      const int s = kt % kStages;
      mbar_wait_parity(&full[s], (kt / kStages) & 1);
      const __nv_bfloat16* a = tiles_a + s * kBM * kBK + half * 64 * kBK;
      const __nv_bfloat16* b = tiles_b + s * kBN * kBK;
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < kBK / 16; ++kk) {
        wgmma_m64n256k16(d, smem_desc(a + kk * 16), smem_desc(b + kk * 16));
      }
      wgmma_commit();
      // Keep this k-tile's wgmmas running, but make sure the previous tile's have finished
      // reading shared memory before handing that stage back to the producer.
      wgmma_wait<1>();
      if (kt > 0 && warp_leader) mbar_arrive(&empty[(kt - 1) % kStages]);
    }
    wgmma_wait<0>();
#pragma unroll
    for (int i = 0; i < 128; ++i) fence_operand(d[i]);

    const int lane = threadIdx.x % 32;
    const int row = tile_m * kBM + half * 64 + (threadIdx.x / 32 % 4) * 16 + lane / 4;
    const int col0 = tile_n * kBN + 2 * (lane % 4);
#pragma unroll
    for (int j = 0; j < kBN / 8; ++j) {
      const int col = col0 + 8 * j;
      if (col < n) {
        if (row < m) {
          *reinterpret_cast<__nv_bfloat162*>(c + size_t(row) * n + col) =
              __floats2bfloat162_rn(d[4 * j], d[4 * j + 1]);
        }
        if (row + 8 < m) {
          *reinterpret_cast<__nv_bfloat162*>(c + size_t(row + 8) * n + col) =
              __floats2bfloat162_rn(d[4 * j + 2], d[4 * j + 3]);
        }
      }
    }
  }
}
