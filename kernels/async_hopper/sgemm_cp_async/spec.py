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
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from harness.spec import (
    Buf,
    Case,
    DeviceLimits,
    KernelSpec,
    Launch,
    Problem,
    RequireSm,
    Scalar,
    Tolerance,
    Work,
)
from harness.vendor import torch_matmul

TILE = 128  # BM = BN in the .cu
THREADS = 256
STAGES = (2, 3, 4)  # one extern "C" entry each: sgemm_cp_async_stages<S>
SHAPES = (
    (4096, 4096, 4096),
    (1000, 776, 520),  # partial tiles in M (104 rows) and N (8 columns)
    (72, 36, 8),  # tiny: one partial block, one k-tile, fewer than STAGES-1 to prefetch
)


def _case(m: int, n: int, k: int, stages: int) -> Case:
    # Inputs are N(0,1), so each output is a sum of K unit-variance products: |c| ~ sqrt(K), and
    # fp32 accumulation error grows like eps * K (measured ~1e-5 * sqrt(K) at most). atol
    # 1e-4 * sqrt(K) keeps a >10x margin, yet a wrong element is off by O(1) or O(sqrt(K)).
    return Case(
        f"m{m}_n{n}_k{k}_stages{stages}",
        {"M": m, "N": n, "K": k, "stages": stages},
        Tolerance(1e-4, 1e-4 * float(np.sqrt(k))),
    )


CASES = tuple(_case(m, n, k, s) for m, n, k in SHAPES for s in STAGES)


def _shape(case: Case) -> tuple[int, int, int]:
    m, n, k = (int(case.params[d]) for d in ("M", "N", "K"))
    if m < 1 or n < 4 or k < 8 or n % 4 or k % 8:
        raise ValueError(f"M={m} N={n} K={k}: need M >= 1, N % 4 == 0 and K % 8 == 0")
    return m, n, k


def setup(case: Case, rng: np.random.Generator, device: DeviceLimits) -> Problem:
    m, n, k = _shape(case)
    if (m + 128) * k >= 2**31 or (k + 16) * n >= 2**31:  # offsets of padded tiles too
        raise ValueError(f"M={m} N={n} K={k}: the .cu indexes A and B with 32-bit offsets")
    stages = int(case.params["stages"])
    if stages not in STAGES:
        raise ValueError(f"stages={stages}: the .cu instantiates {STAGES}")
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    launch = Launch(
        entry=f"sgemm_cp_async_stages{stages}",
        grid=(-(-n // TILE), -(-m // TILE), 1),
        block=(THREADS, 1, 1),
        args=(
            Buf("a"),
            Buf("b"),
            Buf("c"),
            Scalar(np.int32(m)),
            Scalar(np.int32(n)),
            Scalar(np.int32(k)),
        ),
    )  # static shared memory: 8.3 KB per stage, 33.3 KB at most
    return Problem(
        inputs={"a": a, "b": b},
        outputs={"c": np.empty((m, n), np.float32)},
        launches=(launch,),
    )


def reference(case: Case, inputs: Mapping[str, np.ndarray]) -> Mapping[str, np.ndarray]:
    a, b = inputs["a"].astype(np.float64), inputs["b"].astype(np.float64)
    return {"c": (a @ b).astype(np.float32)}


def work(case: Case) -> Work:
    m, n, k = _shape(case)
    return Work(flops=2 * m * n * k, bytes=4 * (m * k + k * n + m * n))


SPEC = KernelSpec(
    source="sgemm_cp_async.cu",
    cases=CASES,
    setup=setup,
    reference=reference,
    work=work,
    requires=RequireSm(8, 0),
    vendor=torch_matmul("a", "b"),  # cuBLAS fp32 SGEMM, TF32 off
)
