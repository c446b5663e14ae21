"""The problem of the chapter's two SGEMMs: sgemm_reg_tiled, and sgemm_cp_async, which pipelines
its loads. C = A @ B in fp32, all row-major, A (M x K) and B (K x N) drawn from N(0, 1), checked
against numpy's float64 product and timed beside cuBLAS's fp32 SGEMM. Both .cu compute the same
128 x 128 block tile with 8 x 8 outputs per thread, so the launch is the same: one block of 256
threads per tile of C.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from harness.spec import (
    Buf,
    Case,
    DeviceLimits,
    KernelSpec,
    Launch,
    Problem,
    Requirement,
    Scalar,
    Tolerance,
    Work,
    grid_2d,
)
from harness.vendor import torch_matmul

TILE = 128  # BM = BN in the .cu
THREADS = 256
SHAPES = (
    (4096, 4096, 4096),
    (1000, 776, 520),  # partial tiles in M (104 rows) and N (8 columns)
    (72, 36, 8),  # tiny: one partial block, a single k-tile
)


def sgemm_case(m: int, n: int, k: int, **variant: int) -> Case:
    """Case `m{M}_n{N}_k{K}`, then `_{key}{value}` for each variant parameter (stages=3)."""
    # Inputs are N(0,1), so each output is a sum of K unit-variance products: |c| ~ sqrt(K), and
    # fp32 accumulation error grows like eps * K (measured ~1e-5 * sqrt(K) at most). atol
    # 1e-4 * sqrt(K) keeps a >10x margin, yet a wrong element is off by O(1) or O(sqrt(K)).
    suffix = "".join(f"_{key}{value}" for key, value in variant.items())
    return Case(
        f"m{m}_n{n}_k{k}{suffix}",
        {"M": m, "N": n, "K": k, **variant},
        Tolerance(1e-4, 1e-4 * float(np.sqrt(k))),
    )


def sgemm_shape(case: Case) -> tuple[int, int, int]:
    m, n, k = (int(case.params[d]) for d in ("M", "N", "K"))
    if m < 1 or n < 4 or k < 8 or n % 4 or k % 8:
        raise ValueError(f"M={m} N={n} K={k}: need M >= 1, N % 4 == 0 and K % 8 == 0")
    return m, n, k


def reference(case: Case, inputs: Mapping[str, np.ndarray]) -> Mapping[str, np.ndarray]:
    a, b = inputs["a"].astype(np.float64), inputs["b"].astype(np.float64)
    return {"c": (a @ b).astype(np.float32)}


def work(case: Case) -> Work:
    m, n, k = sgemm_shape(case)
    return Work(flops=2 * m * n * k, bytes=4 * (m * k + k * n + m * n))


def sgemm_spec(
    cases: tuple[Case, ...],
    entry: Callable[[Case], str],
    *,
    requires: Requirement | None = None,
) -> KernelSpec:
    """The spec of an SGEMM whose extern "C" entry for a case is entry(case), which also checks
    what that kernel alone demands of the case."""

    def setup(case: Case, rng: np.random.Generator, device: DeviceLimits) -> Problem:
        m, n, k = sgemm_shape(case)
        launch_entry = entry(case)
        a = rng.standard_normal((m, k), dtype=np.float32)
        b = rng.standard_normal((k, n), dtype=np.float32)
        launch = Launch(
            entry=launch_entry,
            grid=grid_2d(n, m, TILE, TILE),
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

    return KernelSpec(
        cases=cases,
        setup=setup,
        reference=reference,
        work=work,
        requires=requires,
        vendor=torch_matmul("a", "b"),  # cuBLAS fp32 SGEMM, TF32 off
    )
