"""Register-tiled SGEMM, the "v4" baseline: C = A @ B in fp32, row-major.

Teaches two-level tiling: a 128x128 block tile staged through shared memory 8 columns of K at a
time, and an 8x8 register tile per thread, so each pair of shared float4 loads feeds 64 FFMA.
Tiles travel global -> registers -> shared with a barrier before and after the compute, so
loading and computing take turns: the baseline that sgemm_cp_async pipelines.

Contract: any M >= 1; N % 4 == 0 (float4 rows stay 16-byte aligned) and K % 8 == 0 (whole
k-tiles). Partial 128-row/column tiles load zeros and guard their stores. The problem, its cases
and its check: ../sgemm.py, shared with sgemm_cp_async.
"""

from ..sgemm import SHAPES, sgemm_case, sgemm_spec

SPEC = sgemm_spec(tuple(sgemm_case(m, n, k) for m, n, k in SHAPES), lambda case: "sgemm_reg_tiled")
