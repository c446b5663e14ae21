// sgemm_cp_async.cu: the 128x128x8 register-tiled SGEMM fed by a STAGES-deep cp.async pipeline.
//
// C (MxN) = A (MxK) * B (KxN), fp32, all row-major. Any M; N % 4 == 0 and K % 8 == 0 so that every
// 16-byte copy is aligned and every k-tile is whole.
//
// cp.async moves global -> shared without a register round trip and without blocking the
// thread, so while tile kt is being multiplied, the next STAGES-1 tiles are in flight. One
// commit_group per k-tile makes "group i" mean "tile i", and wait_group(STAGES-2) then says
// exactly which tile has landed.
//
// The compute is sgemm_reg_tiled's (128x128 block tile, 8x8 per thread) with the classic SIMT
// trick on top: while the 64 FFMA of k-step k run, the A and B fragments of k-step k+1 are
// already being read from shared memory into a second register buffer. For that a fragment must
// be small, so A is stored TRANSPOSED in shared memory (As[k][m], like B's [k][n]): one k-step
// is 2 LDS.128 of A + 2 LDS.128 of B = 16 registers, two buffers 32. On an H200 this took the
// 3-stage kernel from 40.8 to 44.6 TFLOPS at 4096^3 (docs/reports/h200 has the run).
//
// cp.async cannot transpose 16-byte chunks, so A is copied with 4-byte cp.async (.ca, the only
// variant that allows 4 bytes): 4 per thread per k-tile, a warp covering 4 rows x 8 k
// (four full 32-byte sectors). The A rows are padded to LDA = 132 floats so these scattered
// 4-byte writes hit 32 distinct banks and every row start stays 16-byte aligned.
//
// The barrier sits just before the LAST k-step of a tile: there every thread has already read
// all fragments of tile kt into registers, so the barrier both frees tile kt's stage (refilled
// right away with tile kt + STAGES) and publishes tile kt+1, whose first fragment then loads
// while the last k-step of tile kt computes. No shared-load latency follows a barrier. The
// prologue therefore fills all STAGES stages.
//
// Global offsets are 32-bit element indices (saves registers under the 128 cap): M*K and K*N
// must stay below 2^31, checked by the spec's setup().
#include <cstdint>

namespace {

constexpr int BM = 128, BN = 128, BK = 8;
constexpr int TM = 8, TN = 8;
constexpr int kThreads = (BM / TM) * (BN / TN);  // 256
constexpr int LDA = BM + 4;                      // padded row of the transposed A tile
constexpr int kAStage = BK * LDA, kBStage = BK * BN;  // floats per stage
constexpr int kACopies = BM * BK / kThreads;           // 4-byte copies of A per thread
constexpr int kBCopies = BK * BN / 4 / kThreads;       // 16-byte copies of B per thread
constexpr int kKBlocks = BK / 8;                       // 8-wide k blocks per tile
static_assert(kACopies == 4 * kKBlocks && kBCopies * kThreads * 4 == BK * BN, "");
static_assert(LDA % 4 == 0, "LDS.128 of A needs 16-byte aligned rows");

__device__ __forceinline__ void cp_async_4(float* smem, const float* gmem, bool valid) {
  const uint32_t dst = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  const int src_size = valid ? 4 : 0;
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(gmem),
               "r"(src_size)
               : "memory");
}

__device__ __forceinline__ void cp_async_16(float* smem, const float* gmem, bool valid) {
  const uint32_t dst = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  const int src_size = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gmem),
               "r"(src_size)
               : "memory");
}

__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}

template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

template <int STAGES>
__device__ __forceinline__ void sgemm_regpf_impl(float* As, float* Bs, const float* __restrict__ A,
                                                 const float* __restrict__ B,
                                                 float* __restrict__ C, int M, int N, int K) {
  static_assert(STAGES >= 2, "");
  const int tid = threadIdx.x;
  const int warp = tid / 32, lane = tid % 32;
  // Same warp shape as the baseline (4x8 threads), but each thread now owns the row blocks
  // ty*4 + {0..3} and 64 + ty*4 + {0..3} (and the same for columns with tx): one LDS.128 of a
  // warp reads 4 consecutive float4 of A (64 bytes) or 8 of B (128 bytes), one wavefront.
  const int ty = (warp / 2) * 4 + lane / 8;  // 0..15
  const int tx = (warp % 2) * 8 + lane % 8;  // 0..15

  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;

  // A copy roles: k = a_k + 8 * kb, m = a_m + 32 * mb for copy j = mb * kKBlocks + kb.
  const int a_k = tid % 8, a_m = tid / 8;                 // 0..7, 0..31
  const int a_rows_left = M - m0 - a_m;                   // row a_m + 32 mb valid iff > 32 mb
  const int a_src = (m0 + a_m) * K + a_k;                 // used only for valid rows
  const int a_mb_step = 32 * K;
  const int a_dst = a_k * LDA + a_m;
  // B copy roles: rows b_row + 8 c, one float4 at column b_col.
  const int b_row = tid / (BN / 4), b_col = (tid % (BN / 4)) * 4;
  const bool b_ok = n0 + b_col < N;  // N % 4 == 0: a float4 is all in or all out
  const int b_src = b_row * N + (b_ok ? n0 + b_col : 0);
  const int b_dst = b_row * BN + b_col;

  // Copies k-tile t into stage `buf`. Disabled copies (rows past M, columns past N, k past K)
  // zero-fill and read the matrix base, which is always mapped; zeros add nothing to the dots.
  auto load_tile = [&](int buf, int t) {
    const int k0 = t * BK;
    float* as = As + buf * kAStage;
    float* bs = Bs + buf * kBStage;
#pragma unroll
    for (int mb = 0; mb < 4; ++mb) {
#pragma unroll
      for (int kb = 0; kb < kKBlocks; ++kb) {
        const bool ok = 32 * mb < a_rows_left && k0 + 8 * kb < K;
        cp_async_4(as + a_dst + 8 * kb * LDA + 32 * mb,
                   A + (ok ? a_src + mb * a_mb_step + k0 + 8 * kb : 0), ok);
      }
    }
#pragma unroll
    for (int c = 0; c < kBCopies; ++c) {
      const bool ok = b_ok && k0 + b_row + 8 * c < K;
      cp_async_16(bs + b_dst + 8 * c * BN, B + (ok ? b_src + (k0 + 8 * c) * N : 0), ok);
    }
  };

  const int num_tiles = (K + BK - 1) / BK;
  // Prologue: all STAGES stages (the first refill comes only after tile 0 is fully read).
  // Commit even when there is no tile so that group i is always tile i.
#pragma unroll
  for (int s = 0; s < STAGES; ++s) {
    if (s < num_tiles) load_tile(s, s);
    cp_async_commit();
  }

  float acc[TM][TN] = {};
  float fa[2][TM], fb[2][TN];
  auto load_frag = [&](int slot, const float* as, const float* bs, int k) {
    *reinterpret_cast<float4*>(&fa[slot][0]) =
        *reinterpret_cast<const float4*>(as + k * LDA + ty * 4);
    *reinterpret_cast<float4*>(&fa[slot][4]) =
        *reinterpret_cast<const float4*>(as + k * LDA + 64 + ty * 4);
    *reinterpret_cast<float4*>(&fb[slot][0]) =
        *reinterpret_cast<const float4*>(bs + k * BN + tx * 4);
    *reinterpret_cast<float4*>(&fb[slot][4]) =
        *reinterpret_cast<const float4*>(bs + k * BN + 64 + tx * 4);
  };

  cp_async_wait<STAGES - 1>();  // group 0 = tile 0
  __syncthreads();
  int read_stage = 0;
  const float* as = As;
  const float* bs = Bs;
  load_frag(0, as, bs, 0);

  for (int kt = 0; kt < num_tiles; ++kt) {
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      if (k < BK - 1) {
        load_frag((k + 1) % 2, as, bs, k + 1);
      } else {
        // STAGES + kt groups committed; the newest STAGES-2 may stay pending, so groups
        // 0..kt+1 (tile kt+1) have landed. After the barrier every thread has also read all of
        // tile kt (its last fragment was loaded in step BK-2): refill its stage.
        cp_async_wait<STAGES - 2>();
        __syncthreads();
        if (kt + STAGES < num_tiles) load_tile(read_stage, kt + STAGES);
        cp_async_commit();  // empty at the tail: keeps "group i = tile i"
        read_stage = read_stage + 1 == STAGES ? 0 : read_stage + 1;
        as = As + read_stage * kAStage;
        bs = Bs + read_stage * kBStage;
        // First fragment of tile kt+1 (on the last tile: stale data, never used).
        load_frag(0, as, bs, 0);
      }
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(fa[k % 2][i], fb[k % 2][j], acc[i][j]);
    }
  }
  cp_async_wait<0>();

  // Rows ty*4 + i and 64 + ty*4 + i, columns tx*4 + {0..3} and 64 + tx*4 + {0..3}.
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int row = m0 + (i / 4) * 64 + ty * 4 + i % 4;
    if (row >= M) continue;
    float* c_row = C + static_cast<size_t>(row) * N;
    const int c0 = n0 + tx * 4, c1 = n0 + 64 + tx * 4;
    if (c0 < N) *reinterpret_cast<float4*>(c_row + c0) = *reinterpret_cast<float4*>(&acc[i][0]);
    if (c1 < N) *reinterpret_cast<float4*>(c_row + c1) = *reinterpret_cast<float4*>(&acc[i][4]);
  }
}

}  // namespace

// grid = (ceil(N/128), ceil(M/128), 1), block = 256, static shared memory
// STAGES * (BK*LDA + BK*BN) * 4 bytes: 16.6 KB for 2 stages, 33.3 KB for 4.
// __launch_bounds__(256, 2) caps registers at 128 so that two blocks share an SM: one block's
// barrier wait is hidden by the other's FFMAs.
#define SGEMM_CP_ASYNC_ENTRY(S)                                                          \
  extern "C" __global__ void __launch_bounds__(kThreads, 2)                              \
      sgemm_cp_async_stages##S(const float* __restrict__ A, const float* __restrict__ B, \
                               float* __restrict__ C, int M, int N, int K) {            \
    __shared__ __align__(16) float As[S * kAStage];                                      \
    __shared__ __align__(16) float Bs[S * kBStage];                                      \
    sgemm_regpf_impl<S>(As, Bs, A, B, C, M, N, K);                                       \
  }

SGEMM_CP_ASYNC_ENTRY(2)
SGEMM_CP_ASYNC_ENTRY(3)
SGEMM_CP_ASYNC_ENTRY(4)
