"""Double buffering: two shared-memory tiles, loading tile t+1 while computing tile t.

Teaches software pipelining with plain loads and one `__syncthreads()` per tile: each block
walks one row tile by tile; at step t it first issues the global loads of tile t+1 into
registers, then computes tile t out of shared buffer t % 2, and only then writes the registers
into buffer (t+1) % 2 and meets the barrier. The loads are in flight during the compute, and
the second buffer is what allows writing tile t+1 before the other threads are done reading
tile t.

What it computes (the chapter leaves the arithmetic open): x is rows x len float32, tiles are
2048 consecutive floats of a row (the last tile of a row may be shorter). Per tile, a 3-point
sum that stays inside the tile: y[r, i] = (s[i-1] + s[i]) + s[i+1], where s is i's tile and a
neighbour outside the tile or past the row's end counts as 0. The reference does the same
float32 adds in the same order, so the comparison is exact.

Memory bound: x is read once and y written once. len must be a multiple of 4 (float4 rows).
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
    int32_extent,
)

THREADS = 256  # kThreads in the .cu
TILE = 2048  # kTile in the .cu: kThreads * kVecPerThread * 4
# The kernel and the reference add the same float32 values in the same order (no
# multiplications, so no FMA contraction): the results are bit-identical.
EXACT = Tolerance(rtol=0.0, atol=0.0)


def _case(rows: int, length: int) -> Case:
    return Case(f"{rows}x{length}", {"rows": rows, "len": length}, tolerance=EXACT)


CASES = (
    # 256 MiB read + 256 MiB written; 16 tiles per row, so the pipeline runs 15 overlapped steps.
    _case(2048, 32768),
    # len not a multiple of the tile: 2 full tiles and a last one of 908 floats per row.
    _case(37, 5004),
    # One tile only, and a partial one (1000 of 2048): the prologue load, no prefetch at all.
    _case(1, 1000),
    # The smallest row: one float4, both of its ends at a tile edge.
    _case(3, 4),
)


def _shape(case: Case) -> tuple[int, int]:
    rows, length = int(case.params["rows"]), int(case.params["len"])
    if length <= 0 or length % 4 != 0:
        raise ValueError(f"len={length}: must be a positive multiple of 4 (float4 rows)")
    int32_extent("rows * len", rows * length)  # the kernel's indices are 32-bit ints
    return rows, length


def setup(case: Case, rng: np.random.Generator, device: DeviceLimits) -> Problem:
    rows, length = _shape(case)
    x = rng.random((rows, length), dtype=np.float32) * np.float32(2) - np.float32(1)  # [-1, 1)
    launch = Launch(
        entry="double_buffer_stencil3",
        grid=(rows, 1, 1),  # one block per row
        block=(THREADS, 1, 1),
        args=(Buf("x"), Buf("y"), Scalar(np.int32(length))),
    )
    return Problem(
        inputs={"x": x},
        outputs={"y": np.empty((rows, length), dtype=np.float32)},
        launches=(launch,),
    )


def reference(case: Case, inputs: Mapping[str, np.ndarray]) -> Mapping[str, np.ndarray]:
    x = inputs["x"]
    left = np.zeros_like(x)  # s[i-1]
    left[:, 1:] = x[:, :-1]
    left[:, ::TILE] = 0  # a tile's first element has no left neighbour
    right = np.zeros_like(x)  # s[i+1]; 0 past the row's end
    right[:, :-1] = x[:, 1:]
    right[:, TILE - 1 :: TILE] = 0  # a tile's last element has no right neighbour
    y = left + x  # float32 throughout, in the kernel's order: (left + centre) + right
    y += right
    return {"y": y}


def work(case: Case) -> Work:
    rows, length = _shape(case)
    return Work(bytes=2 * rows * length * 4)


SPEC = KernelSpec(
    cases=CASES,
    setup=setup,
    reference=reference,
    work=work,
    requires=None,
)
