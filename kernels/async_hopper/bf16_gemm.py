"""The problem of the chapter's two tensor-core GEMMs: wgmma_ws_gemm (Hopper) and tcgen05_gemm
(Blackwell). C = A @ B in bf16 with fp32 accumulation; A is M x K row-major and B is stored
N x K, both K-major, which is what the tensor cores read from shared memory without a transpose
and what cuBLAS's fastest bf16 path ("TN") uses. Both .cu compute a 128 x 256 x 64 tile fed by
TMA with 128-byte swizzle, so the cases, the tensor maps, the reference and the work are the
same; the block, the shared memory and the requirement are each kernel's own.

Contract: K % 8 == 0 (TMA wants 16-byte row strides) and N % 2 == 0 (C is stored in pairs);
M, N and K need not be multiples of the tile: TMA zero-fills what lies outside. The reference
multiplies the same bf16 values in fp32 (numpy's BLAS) over the whole output, large cases
included, then rounds to bf16 as the kernels do.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from ml_dtypes import bfloat16

from harness.spec import (
    Buf,
    Case,
    DeviceLimits,
    DeviceUnsupported,
    KernelSpec,
    Launch,
    Math,
    Problem,
    Requirement,
    Scalar,
    TensorMap,
    Tolerance,
    Work,
    ceil_div,
)
from harness.vendor import torch_matmul

BM, BN, BK = 128, 256, 64  # the .cu's tile


def gemm_case(m: int, n: int, k: int) -> Case:
    # Inputs are N(0,1) rounded to bf16, so |c| ~ sqrt(K). Both sides round the fp32 sum to
    # bf16 (relative step 2^-8), and may land one step apart when the fp32 sums differ in the
    # last bits: rtol 1e-2 covers one step. atol covers the near-zero sums. A dropped or repeated
    # k-tile is off by ~sqrt(64) = 8, far outside both.
    tolerance = Tolerance(1e-2, 1e-3 * float(np.sqrt(k)))
    return Case(f"m{m}_n{n}_k{k}", {"M": m, "N": n, "K": k}, tolerance)


CASES = (
    gemm_case(4096, 4096, 4096),
    gemm_case(8192, 8192, 8192),
    gemm_case(1000, 1000, 1000),  # no dimension a multiple of its tile: partial tiles everywhere
)


def _shape(case: Case) -> tuple[int, int, int]:
    m, n, k = (int(case.params[d]) for d in ("M", "N", "K"))
    if min(m, n, k) < 1 or k % 8 or n % 2:
        raise ValueError(f"M={m} N={n} K={k}: need K % 8 == 0 and N % 2 == 0")
    return m, n, k


def _bf16_normal(rng: np.random.Generator, shape: tuple[int, int]) -> np.ndarray:
    return rng.standard_normal(shape, dtype=np.float32).astype(bfloat16)


def reference(case: Case, inputs: Mapping[str, np.ndarray]) -> Mapping[str, np.ndarray]:
    a, b = inputs["a"].astype(np.float32), inputs["b"].astype(np.float32)
    return {"c": (a @ b.T).astype(bfloat16)}


def work(case: Case) -> Work:
    m, n, k = _shape(case)
    return Work(flops=2 * m * n * k, bytes=2 * (m * k + n * k + m * n), math=Math.BF16_TENSOR)


def gemm_spec(
    entry: str,
    threads: int,
    smem_bytes: int,
    requires: Requirement,
    sass_must_contain: tuple[str, ...],
) -> KernelSpec:
    """The spec of a kernel `entry` that computes one BM x BN tile of C per block of
    `threads`, with `smem_bytes` of dynamic shared memory."""

    def setup(case: Case, rng: np.random.Generator, device: DeviceLimits) -> Problem:
        m, n, k = _shape(case)
        if device.smem_optin_bytes < smem_bytes:
            raise DeviceUnsupported(
                f"needs {smem_bytes} bytes of shared memory per block, the device allows "
                f"{device.smem_optin_bytes}"
            )
        launch = Launch(
            entry=entry,
            grid=(ceil_div(m, BM) * ceil_div(n, BN), 1, 1),
            block=(threads, 1, 1),
            args=(
                TensorMap("a", box=(BM, BK), swizzle_bytes=128),
                TensorMap("b", box=(BN, BK), swizzle_bytes=128),
                Buf("c"),
                Scalar(np.int32(m)),
                Scalar(np.int32(n)),
                Scalar(np.int32(k)),
            ),
            shmem_bytes=smem_bytes,
        )
        return Problem(
            inputs={"a": _bf16_normal(rng, (m, k)), "b": _bf16_normal(rng, (n, k))},
            outputs={"c": np.empty((m, n), bfloat16)},
            launches=(launch,),
        )

    return KernelSpec(
        cases=CASES,
        setup=setup,
        reference=reference,
        work=work,
        requires=requires,
        vendor=torch_matmul("a", "b", b_is_n_by_k=True),
        sass_must_contain=sass_must_contain,
    )
