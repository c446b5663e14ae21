"""Register-tiled SGEMM, the "v4" baseline: C = A @ B in fp32, row-major.

Teaches two-level tiling: a 128x128 block tile staged through shared memory 8 columns of K at a
time, and an 8x8 register tile per thread, so each pair of shared float4 loads feeds 64 FFMA.
Tiles travel global -> registers -> shared with a barrier before and after the compute, so
loading and computing take turns: the baseline that sgemm_cp_async pipelines.

Contract: any M >= 1; N % 4 == 0 (float4 rows stay 16-byte aligned) and K % 8 == 0 (whole
k-tiles). Partial 128-row/column tiles load zeros and guard their stores.
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
    Scalar,
    Tolerance,
    Work,
)
from harness.vendor import torch_matmul

TILE = 128  # BM = BN in the .cu
THREADS = 256


def _case(m: int, n: int, k: int) -> Case:
    # Inputs are N(0,1), so each output is a sum of K unit-variance products: |c| ~ sqrt(K), and
    # fp32 accumulation error grows like eps * K (measured ~1e-5 * sqrt(K) at most). atol
    # 1e-4 * sqrt(K) keeps a >10x margin, yet a wrong element is off by O(1) or O(sqrt(K)).
    return Case(
        f"m{m}_n{n}_k{k}", {"M": m, "N": n, "K": k}, Tolerance(1e-4, 1e-4 * float(np.sqrt(k)))
    )


CASES = (
    _case(4096, 4096, 4096),
    _case(1000, 776, 520),  # partial tiles in M (104 rows) and N (8 columns)
    _case(72, 36, 8),  # tiny: one partial block, a single k-tile
)


def _shape(case: Case) -> tuple[int, int, int]:
    m, n, k = (int(case.params[d]) for d in ("M", "N", "K"))
    if m < 1 or n < 4 or k < 8 or n % 4 or k % 8:
        raise ValueError(f"M={m} N={n} K={k}: need M >= 1, N % 4 == 0 and K % 8 == 0")
    return m, n, k


def setup(case: Case, rng: np.random.Generator, device: DeviceLimits) -> Problem:
    m, n, k = _shape(case)
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    launch = Launch(
        entry="sgemm_reg_tiled",
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
    )
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
    source="sgemm_reg_tiled.cu",
    cases=CASES,
    setup=setup,
    reference=reference,
    work=work,
    requires=None,
    vendor=torch_matmul("a", "b"),  # cuBLAS fp32 SGEMM, TF32 off
)
