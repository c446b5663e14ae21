"""The problem of warp_allreduce_xor and cg_warp_reduce: the float32 sum of every 32-element group
of x, group g = x[32g : min(32g + 32, n)], one warp-wide reduction each. The xor butterfly leaves
the sum in every lane and the kernel writes every lane's copy; cg::reduce's kernel writes one sum
per group. Inputs are uniform in [-1, 1), both signs, so sums may cancel. Both kernels give each
warp (tile) 8 consecutive groups and issue their 8 loads before reducing, so the launch is the same.
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
    ceil_div,
    grid_1d,
    int32_param,
)

THREADS = 256  # kThreads in the .cu; a multiple of 32
GROUPS = 8  # kGroups in the .cu: 32-element groups per warp (tile)
# Inputs are uniform in [-1, 1), so a warp's sum of |x| is at most 32. Both reductions add in five
# levels (the butterfly's, cg::reduce's tree), each rounding once, so the float32 sum is within
# 5 * 2^-24 * 32 < 1e-5 of the exact one: docs/CONTRACT.md's atol of 1e-4 covers it, including
# sums that cancel to near zero.
TOLERANCE = Tolerance(rtol=1e-4, atol=1e-4)

CASES = (
    # 128 MiB read, and either 128 MiB (every lane) or 1M group sums written.
    Case("n33554432", {"n": 1 << 25}, tolerance=TOLERANCE),
    # 1000003 = 32 * 31250 + 3: a last group of 3 lanes (group 31250, warp 3906's third), in a
    # block (2048 elements = 64 groups) whose later groups and warps are empty; that warp's
    # last 5 groups are past n.
    Case("n1000003", {"n": 1_000_003}, tolerance=TOLERANCE),
    # One full group and a second group with a single lane, in one warp.
    Case("n33", {"n": 33}, tolerance=TOLERANCE),
    # A single element: the sum of a one-lane group is that element; one warp, one real lane,
    # seven empty groups, seven empty warps.
    Case("n1", {"n": 1}, tolerance=TOLERANCE),
)


def _group_sums(x: np.ndarray) -> np.ndarray:
    """float64 sums of x's 32-element groups, the last one zero-padded."""
    x = x.astype(np.float64)
    groups = ceil_div(x.size, 32)
    padded = np.zeros(groups * 32)
    padded[: x.size] = x
    return padded.reshape(groups, 32).sum(axis=1)


def warp_sums_spec(entry: str, output: str, *, every_lane: bool) -> KernelSpec:
    """The spec of `entry`, which writes `output`: with every_lane, each lane's copy of its
    group's sum (n floats, an all-reduce); otherwise one sum per group (ceil(n / 32) floats)."""

    def out_size(n: int) -> int:
        return n if every_lane else ceil_div(n, 32)

    def setup(case: Case, rng: np.random.Generator, device: DeviceLimits) -> Problem:
        n = int32_param(case, "n")
        x = rng.uniform(-1.0, 1.0, n).astype(np.float32)  # both signs: sums may cancel
        launch = Launch(
            entry=entry,
            grid=grid_1d(n, THREADS * GROUPS),
            block=(THREADS, 1, 1),
            args=(Buf("x"), Buf(output), Scalar(np.int32(n))),
        )
        return Problem(
            inputs={"x": x},
            outputs={output: np.empty(out_size(n), dtype=np.float32)},
            launches=(launch,),
        )

    def reference(case: Case, inputs: Mapping[str, np.ndarray]) -> Mapping[str, np.ndarray]:
        x = inputs["x"]
        sums = _group_sums(x)
        if every_lane:
            sums = np.repeat(sums, 32)[: x.size]
        return {output: sums.astype(np.float32)}

    def work(case: Case) -> Work:
        n = int32_param(case, "n")
        return Work(bytes=n * 4 + out_size(n) * 4)

    return KernelSpec(cases=CASES, setup=setup, reference=reference, work=work, requires=None)
