// sgemm_cp_async.cu: the 128x128x8 register-tiled SGEMM fed by a STAGES-deep cp.async pipeline.
//
// C (MxN) = A (MxK) * B (KxN), fp32, all row-major. Any M; N % 4 == 0 and K % 8 == 0 so that every
// 16-byte copy is aligned and every k-tile is full.
//
// The compute part is identical to sgemm_reg_tiled: only the way tiles reach shared memory
// changes. cp.async moves global -> shared without a register round trip and without blocking
// the thread, so while tile kt is being multiplied, tiles kt+1 .. kt+STAGES-1 are in flight.
#include <cstdint>

namespace {

constexpr int BM = 128, BN = 128, BK = 8;  // block tile
constexpr int TM = 8, TN = 8;              // per-thread register tile
constexpr int kThreads = (BM / TM) * (BN / TN);  // 256
static_assert(BM * BK / 4 == kThreads && BK * BN / 4 == kThreads,
              "each thread copies exactly one float4 of A and one of B per k-tile");

// src_size = 0 turns the copy into a 16-byte zero fill: out-of-range rows/columns of a partial
// tile become zeros, which add nothing to the dot products, so the hot loop needs no guards.
// .cg caches in L2 only: each tile is read once per block, L1 would only be polluted.
__device__ __forceinline__ void cp_async_16(float* smem, const float* gmem, bool valid) {
  const uint32_t dst = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  const int src_size = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gmem),
               "r"(src_size)
               : "memory");
}

// One group per k-tile: wait_group counts groups, so group i <=> tile i.
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}

template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

template <int STAGES>
__device__ __forceinline__ void sgemm_cp_async_impl(const float* __restrict__ A,
                                                    const float* __restrict__ B,
                                                    float* __restrict__ C, int M, int N, int K) {
  static_assert(STAGES >= 2, "a pipeline needs at least one tile in flight while computing");
  // A is kept k-contiguous ([m][k], 32 bytes per row) so one 16-byte cp.async lands one row
  // segment as is; B is [k][n] like in global memory. 8 KB per stage in total.
  __shared__ __align__(16) float As[STAGES][BM * BK];
  __shared__ __align__(16) float Bs[STAGES][BK * BN];

  const int tid = threadIdx.x;
  // A warp computes a 4x8 grid of threads (32 rows x 64 cols of C): a shared load of A then
  // touches only 4 adjacent rows (4 distinct float4 in distinct banks, the rest broadcast) and a
  // load of B 8 consecutive float4 (128 bytes): each is a single conflict-free wavefront.
  const int warp = tid / 32, lane = tid % 32;
  const int ty = (warp / 2) * 4 + lane / 8;  // 0..15
  const int tx = (warp % 2) * 8 + lane % 8;  // 0..15
  // Thread rows are ty + 16*i and its columns tx*4 + {0..3} and 64 + tx*4 + {0..3}: strided,
  // not blocked, so that neighbouring threads read neighbouring float4 (see above).

  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;

  // Copy roles: A tile 128x8 = 2 float4 per row; B tile 8x128 = 32 float4 per row.
  const int a_row = tid / (BK / 4), a_col = (tid % (BK / 4)) * 4;
  const int b_row = tid / (BN / 4), b_col = (tid % (BN / 4)) * 4;
  const bool a_ok = m0 + a_row < M;
  const bool b_ok = n0 + b_col < N;  // N % 4 == 0: a float4 is all in or all out
  // A disabled copy still needs a mapped address: clamp to row/column 0, which stays in bounds
  // for every k-tile.
  const float* a_src = A + static_cast<size_t>(a_ok ? m0 + a_row : 0) * K + a_col;
  const float* b_src = B + static_cast<size_t>(b_row) * N + (b_ok ? n0 + b_col : 0);
  const size_t b_step = static_cast<size_t>(BK) * N;

  // Copies the next k-tile into stage `buf` and advances the sources by one k-tile.
  auto load_tile = [&](int buf) {
    cp_async_16(&As[buf][a_row * BK + a_col], a_src, a_ok);
    cp_async_16(&Bs[buf][b_row * BN + b_col], b_src, b_ok);
    a_src += BK;
    b_src += b_step;
  };

  const int num_tiles = K / BK;
  // Prologue: STAGES-1 tiles in flight. Commit even when there is no tile (K tiny) so that
  // group i is always tile i and the wait count below stays right.
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < num_tiles) load_tile(s);
    cp_async_commit();
  }

  float acc[TM][TN] = {};

  // Ring indices instead of kt % STAGES: no integer division by 3 in the loop.
  int read_stage = 0, write_stage = STAGES - 1;
  for (int kt = 0; kt < num_tiles; ++kt) {
    // kt + STAGES - 1 groups committed; leaving the newest STAGES-2 pending means groups
    // 0..kt, and so this thread's part of tile kt, have landed.
    cp_async_wait<STAGES - 2>();
    // Everybody's part of tile kt has landed, and everybody finished tile kt-1, whose buffer
    // the next copy overwrites: one barrier per k-tile covers both hazards.
    __syncthreads();
    if (kt + STAGES - 1 < num_tiles) load_tile(write_stage);
    cp_async_commit();  // empty at the tail: keeps "group i = tile i"

    const float* as = As[read_stage];
    const float* bs = Bs[read_stage];
    write_stage = read_stage;  // the stage just freed: tile kt's, consumed by the next barrier
    read_stage = read_stage + 1 == STAGES ? 0 : read_stage + 1;
#pragma unroll
    for (int kq = 0; kq < BK; kq += 4) {
      // 4 k-steps of A for all 8 rows in 8 LDS.128: 32 registers, reused by 4x64 FFMA.
      float a[TM][4];
#pragma unroll
      for (int i = 0; i < TM; ++i)
        *reinterpret_cast<float4*>(a[i]) =
            *reinterpret_cast<const float4*>(as + (ty + 16 * i) * BK + kq);
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        float b[TN];
        *reinterpret_cast<float4*>(b) =
            *reinterpret_cast<const float4*>(bs + (kq + kk) * BN + tx * 4);
        *reinterpret_cast<float4*>(b + 4) =
            *reinterpret_cast<const float4*>(bs + (kq + kk) * BN + 64 + tx * 4);
        // 64 independent FFMA per 2 shared loads: the arithmetic intensity that makes this a
        // compute-bound kernel.
#pragma unroll
        for (int i = 0; i < TM; ++i)
#pragma unroll
          for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i][kk], b[j], acc[i][j]);
      }
    }
  }
  // Nothing may be left in flight when the block exits (only empty groups remain, but be exact).
  cp_async_wait<0>();

  // Each row segment is a float4 store; 8 lanes cover 128 contiguous bytes.
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int row = m0 + ty + 16 * i;
    if (row >= M) continue;
    float* c_row = C + static_cast<size_t>(row) * N;
    const int c0 = n0 + tx * 4, c1 = n0 + 64 + tx * 4;
    if (c0 < N) *reinterpret_cast<float4*>(c_row + c0) = *reinterpret_cast<float4*>(&acc[i][0]);
    if (c1 < N) *reinterpret_cast<float4*>(c_row + c1) = *reinterpret_cast<float4*>(&acc[i][4]);
  }
}

}  // namespace

// grid = (ceil(N/128), ceil(M/128), 1), block = 256, static shared memory 8 KB * STAGES.
// Two blocks of ~128 registers/thread fit one SM; the second block hides the other's barriers.
#define SGEMM_CP_ASYNC_ENTRY(S)                                                              \
  extern "C" __global__ void __launch_bounds__(kThreads, 2)                                  \
      sgemm_cp_async_stages##S(const float* __restrict__ A, const float* __restrict__ B,    \
                               float* __restrict__ C, int M, int N, int K) {                \
    sgemm_cp_async_impl<S>(A, B, C, M, N, K);                                                \
  }

SGEMM_CP_ASYNC_ENTRY(2)
SGEMM_CP_ASYNC_ENTRY(3)
SGEMM_CP_ASYNC_ENTRY(4)
