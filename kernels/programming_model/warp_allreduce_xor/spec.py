"""Warp all-reduce: butterfly `__shfl_xor_sync`, every lane ends with its warp's sum (float32).

Teaches the xor-shuffle butterfly (offsets 16, 8, 4, 2, 1): after five register exchanges all
32 lanes hold the warp's total, not just lane 0. The kernel writes every lane's value,
out[i] = sum(x[32w : min(32w + 32, n)]) for w = i // 32, so the check proves that all lanes
hold the sum. Partial last warp: lanes past n contribute 0 and still take part in the
full-mask shuffles (a shrunken mask would leave some in-range lanes' xor partners outside it).

Each warp reduces 8 consecutive groups of 32, loading all 8 before the first shuffle, so that
enough loads are in flight to keep HBM busy (the .cu says why). Bandwidth is reported (x read
once, out written once), but the point is the butterfly.
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

THREADS = 256  # kThreads in the .cu; a multiple of 32
GROUPS = 8  # kGroups in the .cu: 32-element groups per warp
# Inputs are uniform in [-1, 1), so a warp's sum of |x| is at most 32. Each of the five butterfly
# levels rounds once, so the float32 result is within 5 * 2^-24 * 32 < 1e-5 of the exact sum:
# CONTRACT's atol of 1e-4 covers it, including sums that cancel to near zero.
TOLERANCE = Tolerance(rtol=1e-4, atol=1e-4)

CASES = (
    # 128 MiB read + 128 MiB written.
    Case("n33554432", {"n": 1 << 25}, tolerance=TOLERANCE),
    # 1000003 = 32 * 31250 + 3: a last group of 3 lanes; its warp's last 5 groups are past n.
    Case("n1000003", {"n": 1_000_003}, tolerance=TOLERANCE),
    # One full group and a second group with a single lane, in one warp.
    Case("n33", {"n": 33}, tolerance=TOLERANCE),
    # A single element: the sum of a one-lane group is that element.
    Case("n1", {"n": 1}, tolerance=TOLERANCE),
)


def _n(case: Case) -> int:
    n = int(case.params["n"])
    if not 0 < n < 2**31:
        raise ValueError(f"n={n}: the kernel takes n as a 32-bit int")
    return n


def setup(case: Case, rng: np.random.Generator, device: DeviceLimits) -> Problem:
    n = _n(case)
    x = rng.uniform(-1.0, 1.0, n).astype(np.float32)  # both signs: sums may cancel
    launch = Launch(
        entry="warp_allreduce_xor",
        grid=(-(-n // (THREADS * GROUPS)), 1, 1),
        block=(THREADS, 1, 1),
        args=(Buf("x"), Buf("out"), Scalar(np.int32(n))),
    )
    return Problem(
        inputs={"x": x}, outputs={"out": np.empty(n, dtype=np.float32)}, launches=(launch,)
    )


def reference(case: Case, inputs: Mapping[str, np.ndarray]) -> Mapping[str, np.ndarray]:
    x = inputs["x"].astype(np.float64)
    n = x.size
    warps = -(-n // 32)
    padded = np.zeros(warps * 32)
    padded[:n] = x
    sums = padded.reshape(warps, 32).sum(axis=1)
    return {"out": np.repeat(sums, 32)[:n].astype(np.float32)}


def work(case: Case) -> Work:
    return Work(bytes=2 * _n(case) * 4)


SPEC = KernelSpec(
    source="warp_allreduce_xor.cu",
    cases=CASES,
    setup=setup,
    reference=reference,
    work=work,
    requires=None,
)
