"""Two-pass reduce: block partials in one launch, a second one-block launch finishes the sum.

Teaches the grid level: blocks of one grid cannot wait for each other, so a full reduction
needs a grid-wide barrier, and the cheapest portable one is the boundary between two launches
on the same stream. Pass 1 (`two_pass_partials`, G blocks of 256) leaves one partial per block
in a scratch buffer; pass 2 (`two_pass_final`, one block of 1024) folds the G partials into the
total. Both launches are one Problem and are timed together, launch overhead included.

G is read from the device in setup(): SM count x resident blocks per SM of pass 1, so pass 1
is exactly one full wave of a grid-stride loop; it is never below 256 blocks (while the input
has work for them), which also bounds the per-thread summation chain for the tolerance.

What it computes: total[0] = sum(x) as float32, checked against numpy's float64 sum.

Memory bound: the input is read once; the partials (a few KiB) are not counted.
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
    int32_param,
)

THREADS_PASS1 = 256  # reduce_sum<256> in two_pass_partials
THREADS_PASS2 = 1024  # reduce_sum<1024> in two_pass_final
MIN_BLOCKS = 256  # pass 1 uses at least this many blocks when n has work for them
FLOAT32_EPS = float(np.finfo(np.float32).eps)


def _tolerance(n: int) -> Tolerance:
    # Inputs are uniform in [0, 1): non-negative, no cancellation, so the float32 result's
    # relative error is bounded by (adds on the longest dependent chain) * eps. Pass 1: one
    # thread's float4 lane, at most ceil(n / (4 * 256 * MIN_BLOCKS)) adds since G >= MIN_BLOCKS
    # or G covers n in one float4 per thread, then 2 lane adds, 1 tail add and 5 + 5 shuffle
    # levels; pass 2 adds at most 1 + 2 + 1 + 5 + 5 more (G <= 4 * 1024 partials). At n = 64M
    # the chain is 256 + 13 + 14 = 283 adds: 3.4e-5, inside docs/CONTRACT.md's 1e-4. The bound is
    # doubled for margin and rtol never drops below 1e-4.
    lane = ceil_div(n, 4 * THREADS_PASS1 * MIN_BLOCKS)
    chain = lane + 2 + 1 + 10 + (1 + 2 + 1 + 10)
    return Tolerance(rtol=max(1e-4, 2.0 * chain * FLOAT32_EPS), atol=1e-4)


def _case(n: int) -> Case:
    return Case(f"n{n}", {"n": n}, tolerance=_tolerance(n))


CASES = (
    # 256 MiB read: several times the H200's L2.
    _case(1 << 26),
    # Not a multiple of 4: a 3-element scalar tail after the float4 body.
    _case(1_000_003),
    # Tiny: one block of pass 1 (9 float4s + 1 tail element), one partial for pass 2.
    _case(37),
    # A single element: no float4 at all; thread 0 of block 0 adds the tail element.
    _case(1),
)


def _pass1_blocks(n: int, device: DeviceLimits) -> int:
    # One full wave of pass 1 (at least MIN_BLOCKS), but no block without a float4 to read.
    fill = device.sm_count * device.max_blocks_per_sm("two_pass_partials", THREADS_PASS1, 0)
    useful = max(1, ceil_div(n // 4, THREADS_PASS1))
    return min(useful, max(fill, MIN_BLOCKS))


def setup(case: Case, rng: np.random.Generator, device: DeviceLimits) -> Problem:
    n = int32_param(case, "n")
    blocks = _pass1_blocks(n, device)
    if blocks > 4 * THREADS_PASS2:
        raise ValueError(f"{blocks} partials exceed what the tolerance assumes for pass 2")
    x = rng.random(n, dtype=np.float32)  # uniform [0, 1): see _tolerance
    pass1 = Launch(
        entry="two_pass_partials",
        grid=(blocks, 1, 1),
        block=(THREADS_PASS1, 1, 1),
        args=(Buf("x"), Buf("partials"), Scalar(np.int32(n))),
    )
    pass2 = Launch(
        entry="two_pass_final",
        grid=(1, 1, 1),
        block=(THREADS_PASS2, 1, 1),
        args=(Buf("partials"), Buf("total"), Scalar(np.int32(blocks))),
    )
    return Problem(
        inputs={"x": x},
        outputs={"total": np.empty(1, dtype=np.float32)},
        launches=(pass1, pass2),
        # Pass 1 overwrites every partial before pass 2 reads it; NaNs make a miss visible.
        scratch={"partials": np.full(blocks, np.nan, dtype=np.float32)},
    )


def reference(case: Case, inputs: Mapping[str, np.ndarray]) -> Mapping[str, np.ndarray]:
    total = inputs["x"].astype(np.float64).sum()
    return {"total": np.array([total], dtype=np.float32)}


def work(case: Case) -> Work:
    return Work(bytes=int32_param(case, "n") * 4 + 4)


SPEC = KernelSpec(
    cases=CASES,
    setup=setup,
    reference=reference,
    work=work,
    requires=None,
)
