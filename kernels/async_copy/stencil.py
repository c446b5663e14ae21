"""The problem of the chapter's three stencils: stencil_sync stages it with plain loads,
stencil_memcpy_async_thread and stencil_memcpy_async_block with cuda::memcpy_async. Only the
staging differs, so they share the cases, the check and the work (stencil.cuh shares the compute).

What it computes (the chapter leaves the stencil's weights open):

    y[i] = sum_{k=-8..8} w_k * x[i + k],   w_k = (k + 9) / 256,   x[j] = 0 outside [0, n)

float32 in and out. The weights 1/256 ... 17/256 are exact in float32 and asymmetric, so a halo
loaded one chunk off or a mirrored window fails the check; zero padding at both ends means the
first and last 8 outputs check the boundary handling. Each block produces kTile = 2048 outputs from
a shared buffer laid out like the chapter's "8 | 32 | 8": an 8-element left halo, the 2048-element
center and an 8-element right halo, each a whole number of the kernel's copies (16-byte chunks;
8-byte pieces in stencil_memcpy_async_thread).

Memory bound: x is read once from DRAM (the halo re-reads hit L2) and y written once, 8 bytes per
element.
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
    Requirement,
    Scalar,
    Work,
    grid_1d,
    int32_param,
)

THREADS = 256  # kThreads in stencil.cuh
TILE = 2048  # kTile in stencil.cuh: outputs per block
RADIUS = 8
WEIGHTS = np.arange(1, 2 * RADIUS + 2, dtype=np.float64) / 256.0  # w_k for k = -8 .. 8

# Default fp32 tolerance (rtol = atol = 1e-4) is ample: the kernel's 17 fused multiply-adds with
# exact weights err by at most ~17 * 2**-24 * sum_k |w_k x_k| <= ~17 * 6e-8 * 0.6 * max|x|, about
# 4e-6 for N(0, 1) inputs (max|x| ~ 6), while a missing or misplaced tap is off by >= |x| / 256.
CASES = (
    # 2**25 floats: 128 MiB read + 128 MiB written, about four times the H200's L2.
    Case("n33554432", {"n": 1 << 25}),
    # 3 full tiles + 5 elements: the last block has one whole 16-byte chunk (two 8-byte pieces)
    # and a 1-element partial one, and its right halo lies entirely past n (zeros).
    Case("n6149", {"n": 6149}),
    # n % 4 == 0 but not a multiple of the tile: the last block holds exactly one chunk (two
    # pieces).
    Case("n4100", {"n": 4100}),
    # A single element: both halos are padding, the one chunk (piece) is partial.
    Case("n1", {"n": 1}),
)


def _n(case: Case) -> int:
    return int32_param(case, "n", headroom=2 * TILE)


def reference(case: Case, inputs: Mapping[str, np.ndarray]) -> Mapping[str, np.ndarray]:
    n = _n(case)
    padded = np.zeros(n + 2 * RADIUS, dtype=np.float64)  # zero padding at both ends
    padded[RADIUS : RADIUS + n] = inputs["x"]
    # np.correlate 'valid': y[i] = sum_m padded[i + m] * WEIGHTS[m] = sum_k w_k x[i + k], m = k + 8
    y = np.correlate(padded, WEIGHTS, mode="valid")
    assert y.shape == (n,)
    return {"y": y.astype(np.float32)}


def work(case: Case) -> Work:
    return Work(bytes=2 * _n(case) * 4)


def stencil_spec(entry: str, *, requires: Requirement | None = None) -> KernelSpec:
    """The spec of the stencil kernel whose folder, .cu and extern "C" entry are all `entry`."""

    def setup(case: Case, rng: np.random.Generator, device: DeviceLimits) -> Problem:
        n = _n(case)
        x = rng.standard_normal(n, dtype=np.float32)
        launch = Launch(
            entry=entry,
            grid=grid_1d(n, TILE),
            block=(THREADS, 1, 1),
            args=(Buf("x"), Buf("y"), Scalar(np.int32(n))),
        )
        return Problem(
            inputs={"x": x}, outputs={"y": np.empty(n, dtype=np.float32)}, launches=(launch,)
        )

    return KernelSpec(cases=CASES, setup=setup, reference=reference, work=work, requires=requires)
