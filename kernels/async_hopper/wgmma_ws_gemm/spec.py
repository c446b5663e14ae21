"""The chapter's Hopper GEMM: TMA + wgmma + warp specialization, C = A @ B in bf16 (sm_90a).

A is M x K row-major, B is stored N x K (column-major K x N): both K-major, which is what wgmma
reads from shared memory without a transpose and what cuBLAS's fastest bf16 path ("TN") uses.
C is M x N bf16, accumulated in fp32. The .cu explains the producer/consumer structure.

Contract: K % 8 == 0 (TMA wants 16-byte row strides) and N % 2 == 0 (C is stored in pairs);
M, N and K need not be multiples of the 128 x 256 x 64 tile: TMA zero-fills what lies outside.

The reference multiplies the same bf16 values in fp32 (numpy's BLAS) over the whole output,
large cases included, then rounds to bf16 as the kernel does.
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
THREADS = 384  # one producer and two consumer warpgroups
SMEM_BYTES = 1024 + STAGES * (BM + BN) * BK * 2 + 2 * STAGES * 8  # kSmemBytes in the .cu


def _case(m: int, n: int, k: int) -> Case:
    # Inputs are N(0,1) rounded to bf16, so |c| ~ sqrt(K). Both sides round the fp32 sum to
    # bf16 (relative step 2^-8), and may land one step apart when the fp32 sums differ in the
    # last bits: rtol 1e-2 covers one step. atol covers the near-zero sums. A dropped or repeated
    # k-tile is off by ~sqrt(64) = 8, far outside both.
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


def _bf16_normal(rng: np.random.Generator, shape: tuple[int, int]) -> np.ndarray:
    return rng.standard_normal(shape, dtype=np.float32).astype(bfloat16)


def setup(case: Case, rng: np.random.Generator, device: DeviceLimits) -> Problem:
    m, n, k = _shape(case)
    if device.smem_optin_bytes < SMEM_BYTES:
        raise DeviceUnsupported(
            f"needs {SMEM_BYTES} bytes of shared memory per block, the device allows "
            f"{device.smem_optin_bytes}"
        )
    tiles = ceil_div(m, BM) * ceil_div(n, BN)
    launch = Launch(
        entry="wgmma_ws_gemm",
        grid=(tiles, 1, 1),
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
    return Problem(
        inputs={"a": _bf16_normal(rng, (m, k)), "b": _bf16_normal(rng, (n, k))},
        outputs={"c": np.empty((m, n), bfloat16)},
        launches=(launch,),
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
    requires=RequireArch("sm_90a"),
    vendor=torch_matmul("a", "b", b_is_n_by_k=True),
    sass_must_contain=("HGMMA",),
)
