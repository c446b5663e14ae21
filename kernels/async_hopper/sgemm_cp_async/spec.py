"""SGEMM with a STAGES-deep cp.async pipeline (STAGES = 2, 3, 4): C = A @ B in fp32, row-major.

Teaches Ampere's asynchronous copy: cp.async moves global -> shared without a trip through
registers and without blocking the thread (16-byte `cp.async.cg` for B; 4-byte `cp.async.ca` for
A, which lands transposed), one `commit_group` per k-tile, and `wait_group(STAGES-2)` plus one
barrier per k-tile keep the next tiles in flight while the current one is multiplied. Empty
groups are committed at the tail (and in the prologue when K is short) so that group i is always
tile i. The compute is sgemm_reg_tiled's 128x128x8 block tile with 8x8 per thread, plus register
double-buffering of the fragments (the .cu says why): compare the two.

Contract: any M >= 1; N % 4 == 0 (16-byte copies stay aligned) and K % 8 == 0 (whole k-tiles).
Partial 128-row/column tiles are zero-filled by the copy (src-size 0) and guard their stores.
The problem, its shapes and its check: ../sgemm.py, shared with sgemm_reg_tiled; here each shape
runs once per STAGES, and its tiny one has fewer k-tiles than STAGES-1 to prefetch.
"""

from harness.spec import Case, RequireSm, int32_extent

from ..sgemm import SHAPES, sgemm_case, sgemm_shape, sgemm_spec

STAGES = (2, 3, 4)  # one extern "C" entry each: sgemm_cp_async_stages<S>


def _entry(case: Case) -> str:
    m, n, k = sgemm_shape(case)
    # The .cu indexes A and B with 32-bit offsets, those of the zero-filled padded tiles too.
    int32_extent("(M + 128) * K", (m + 128) * k)
    int32_extent("(K + 16) * N", (k + 16) * n)
    stages = int(case.params["stages"])
    if stages not in STAGES:
        raise ValueError(f"stages={stages}: the .cu instantiates {STAGES}")
    return f"sgemm_cp_async_stages{stages}"  # static shared memory: 8.3 KB a stage, 33.3 KB at most


SPEC = sgemm_spec(
    tuple(sgemm_case(m, n, k, stages=s) for m, n, k in SHAPES for s in STAGES),
    _entry,
    requires=RequireSm(8, 0),
)
