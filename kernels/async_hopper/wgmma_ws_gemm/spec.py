"""The chapter's Hopper GEMM: TMA + wgmma + warp specialization, C = A @ B in bf16 (sm_90a).

The problem (layouts, contract, cases, reference) is bf16_gemm's, shared with tcgen05_gemm; the
.cu explains the producer/consumer structure. Its compile cell demands HGMMA, wgmma's SASS.
"""

from __future__ import annotations

from harness.spec import RequireArch

from ..bf16_gemm import BK, BM, BN, gemm_spec

STAGES = 4
THREADS = 384  # one producer and two consumer warpgroups
SMEM_BYTES = 1024 + STAGES * (BM + BN) * BK * 2 + 2 * STAGES * 8  # kSmemBytes in the .cu

SPEC = gemm_spec("wgmma_ws_gemm", THREADS, SMEM_BYTES, RequireArch("sm_90a"), ("HGMMA",))
