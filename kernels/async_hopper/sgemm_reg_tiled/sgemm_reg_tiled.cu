// sgemm_reg_tiled.cu: the "v4" SGEMM, 128x128x8 block tile, 8x8 register tile per thread.
//
// C (MxN) = A (MxK) * B (KxN), fp32, all row-major. Any M; N % 4 == 0 and K % 8 == 0 so that every
// float4 access is aligned and every k-tile is full.
//
// Each k-tile goes global -> registers -> shared, barrier, compute, barrier: loading and computing
// take turns, and the data spends registers and instructions on its way through. That is the
// baseline sgemm_cp_async improves on; the compute part of both kernels is the same.

namespace {

constexpr int BM = 128, BN = 128, BK = 8;  // block tile
constexpr int TM = 8, TN = 8;              // per-thread register tile
constexpr int kThreads = (BM / TM) * (BN / TN);  // 256
static_assert(BM * BK / 4 == kThreads && BK * BN / 4 == kThreads,
              "each thread loads exactly one float4 of A and one of B per k-tile");

}  // namespace

// grid = (ceil(N/128), ceil(M/128), 1), block = 256, 8 KB of static shared memory.
// 128 registers/thread lets two blocks share an SM, so one computes while the other waits.
extern "C" __global__ void __launch_bounds__(kThreads, 2)
    sgemm_reg_tiled(const float* __restrict__ A, const float* __restrict__ B,
                    float* __restrict__ C, int M, int N, int K) {
  // A is kept k-contiguous ([m][k]) so a thread reads 4 k-steps of one row in one LDS.128;
  // B is [k][n] like in global memory.
  __shared__ __align__(16) float As[BM * BK];
  __shared__ __align__(16) float Bs[BK * BN];

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

  // Load roles: A tile 128x8 = 2 float4 per row; B tile 8x128 = 32 float4 per row.
  const int a_row = tid / (BK / 4), a_col = (tid % (BK / 4)) * 4;
  const int b_row = tid / (BN / 4), b_col = (tid % (BN / 4)) * 4;
  // Rows/columns past the matrix load zeros, which add nothing: the compute loop needs no guard.
  const bool a_ok = m0 + a_row < M;
  const bool b_ok = n0 + b_col < N;  // N % 4 == 0: a float4 is all in or all out
  const float* a_src = A + static_cast<size_t>(a_ok ? m0 + a_row : 0) * K + a_col;
  const float* b_src = B + static_cast<size_t>(b_row) * N + (b_ok ? n0 + b_col : 0);
  const size_t b_step = static_cast<size_t>(BK) * N;

  float acc[TM][TN] = {};
  const float4 zero = make_float4(0.f, 0.f, 0.f, 0.f);

  for (int kt = K / BK; kt > 0; --kt) {
    // The round trip through registers: the thread stalls here until both loads return.
    const float4 a_reg = a_ok ? *reinterpret_cast<const float4*>(a_src) : zero;
    const float4 b_reg = b_ok ? *reinterpret_cast<const float4*>(b_src) : zero;
    a_src += BK;
    b_src += b_step;
    *reinterpret_cast<float4*>(&As[a_row * BK + a_col]) = a_reg;
    *reinterpret_cast<float4*>(&Bs[b_row * BN + b_col]) = b_reg;
    __syncthreads();  // the whole tile is in shared memory

#pragma unroll
    for (int kq = 0; kq < BK; kq += 4) {
      // 4 k-steps of A for all 8 rows in 8 LDS.128: 32 registers, reused by 4x64 FFMA.
      float a[TM][4];
#pragma unroll
      for (int i = 0; i < TM; ++i)
        *reinterpret_cast<float4*>(a[i]) =
            *reinterpret_cast<const float4*>(&As[(ty + 16 * i) * BK + kq]);
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        float b[TN];
        *reinterpret_cast<float4*>(b) =
            *reinterpret_cast<const float4*>(&Bs[(kq + kk) * BN + tx * 4]);
        *reinterpret_cast<float4*>(b + 4) =
            *reinterpret_cast<const float4*>(&Bs[(kq + kk) * BN + 64 + tx * 4]);
        // 64 independent FFMA per 2 shared loads: the arithmetic intensity that makes this a
        // compute-bound kernel.
#pragma unroll
        for (int i = 0; i < TM; ++i)
#pragma unroll
          for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i][kk], b[j], acc[i][j]);
      }
    }
    __syncthreads();  // everybody is done reading before the next tile overwrites it
  }

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
