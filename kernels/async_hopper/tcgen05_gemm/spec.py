"""The chapter's Blackwell GEMM: TMA + tcgen05.mma with Tensor Memory, C = A @ B in bf16
(sm_100a).

The problem (layouts, contract, cases, reference, the torch.matmul baseline) is bf16_gemm's,
shared with wgmma_ws_gemm, so that on a B200 runner it runs as it stands; the accumulator is
fp32 in Tensor Memory. The .cu explains the steps.

Compiled and inspected only: the matrix has run it on no CC 10.0 GPU. Its compile cell demands
the SASS of tcgen05.mma (UTCHMMA) and of tcgen05.ld (LDTM), as cuobjdump prints them for
sm_100a; on sm_80 and sm_90a it is skipped target-unsupported, and on any other device its run
cells are skipped device-unsupported.
"""

from __future__ import annotations

from harness.spec import RequireArch

from ..bf16_gemm import BK, BM, BN, gemm_spec

STAGES = 4
THREADS = 128  # producer, MMA issuer and epilogue share the block's four warps
SMEM_BYTES = 1024 + STAGES * (BM + BN) * BK * 2 + (2 * STAGES + 1) * 8 + 16  # kSmemBytes

SPEC = gemm_spec("tcgen05_gemm", THREADS, SMEM_BYTES, RequireArch("sm_100a"), ("UTCHMMA", "LDTM"))
