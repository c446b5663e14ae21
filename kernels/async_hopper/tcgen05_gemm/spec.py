"""The chapter's Blackwell GEMM: TMA + tcgen05.mma with Tensor Memory, C = A @ B in bf16
(sm_100a).

Layouts as wgmma_ws_gemm's: A is M x K row-major and B is stored N x K, both K-major, which the
tensor cores read from shared memory without a transpose (cuBLAS's "TN"). C is M x N bf16; the
accumulator is fp32 in Tensor Memory. The .cu explains the steps.

Contract: K % 8 == 0 (TMA wants 16-byte row strides) and N % 2 == 0 (C is stored in pairs);
M, N and K need not be multiples of the 128 x 256 x 64 tile: TMA zero-fills what lies outside.

Compiled and inspected only: the matrix has run it on no CC 10.0 GPU. Its compile cell demands
the SASS of tcgen05.mma (UTCHMMA) and of tcgen05.ld (LDTM), as cuobjdump prints them for
sm_100a; on sm_80 and sm_90a it is skipped target-unsupported, and on any other device its run
cells are skipped device-unsupported. The reference and the vendor baseline are
wgmma_ws_gemm's, so that on a B200 runner it runs as it stands.
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
    RequireArch,
    Scalar,
    TensorMap,
    Tolerance,
    Work,
    ceil_div,
)
from harness.vendor import torch_matmul

BM, BN, BK = 128, 256, 64  # the .cu's tile
STAGES = 4
THREADS = 128  # producer, MMA issuer and epilogue share the block's four warps
SMEM_BYTES = 1024 + STAGES * (BM + BN) * BK * 2 + (2 * STAGES + 1) * 8 + 16  # kSmemBytes


def _case(m: int, n: int, k: int) -> Case:
    # As wgmma_ws_gemm: both sides round an fp32 sum of bf16 products to bf16 (rtol covers one
    # bf16 step), atol the near-zero sums; a lost or repeated k-tile is off by ~8.
    tolerance = Tolerance(1e-2, 1e-3 * float(np.sqrt(k)))
    return Case(f"m{m}_n{n}_k{k}", {"M": m, "N": n, "K": k}, tolerance)


CASES = (
    _case(4096, 4096, 4096),
    _case(8192, 8192, 8192),
    _case(1000, 1000, 1000),  # no dimension a multiple of its tile: partial tiles everywhere
)


def _shape(case: Case) -> tuple[int, int, int]:
    m, n, k = (int(case.params[d]) for d in ("M", "N", "K"))
    if min(m, n, k) < 1 or k % 8 or n % 2:
        raise ValueError(f"M={m} N={n} K={k}: need K % 8 == 0 and N % 2 == 0")
    return m, n, k


def setup(case: Case, rng: np.random.Generator, device: DeviceLimits) -> Problem:
    m, n, k = _shape(case)
    if device.smem_optin_bytes < SMEM_BYTES:
        raise DeviceUnsupported(
            f"needs {SMEM_BYTES} bytes of shared memory per block, the device allows "
            f"{device.smem_optin_bytes}"
        )
    launch = Launch(
        entry="tcgen05_gemm",
        grid=(ceil_div(m, BM) * ceil_div(n, BN), 1, 1),
        block=(THREADS, 1, 1),
        args=(
            TensorMap("a", box=(BM, BK), swizzle_bytes=128),
            TensorMap("b", box=(BN, BK), swizzle_bytes=128),
            Buf("c"),
            Scalar(np.int32(m)),
            Scalar(np.int32(n)),
            Scalar(np.int32(k)),
        ),
        shmem_bytes=SMEM_BYTES,
    )
    a = rng.standard_normal((m, k), dtype=np.float32).astype(bfloat16)
    b = rng.standard_normal((n, k), dtype=np.float32).astype(bfloat16)
    return Problem(
        inputs={"a": a, "b": b}, outputs={"c": np.empty((m, n), bfloat16)}, launches=(launch,)
    )


def reference(case: Case, inputs: Mapping[str, np.ndarray]) -> Mapping[str, np.ndarray]:
    a, b = inputs["a"].astype(np.float32), inputs["b"].astype(np.float32)
    return {"c": (a @ b.T).astype(bfloat16)}


def work(case: Case) -> Work:
    m, n, k = _shape(case)
    return Work(flops=2 * m * n * k, bytes=2 * (m * k + n * k + m * n), math=Math.BF16_TENSOR)


SPEC = KernelSpec(
    cases=CASES,
    setup=setup,
    reference=reference,
    work=work,
    requires=RequireArch("sm_100a"),
    vendor=torch_matmul("a", "b", b_is_n_by_k=True),
    sass_must_contain=("UTCHMMA", "LDTM"),
)
