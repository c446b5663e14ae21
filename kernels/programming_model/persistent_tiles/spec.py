"""Persistent tiles: a grid of SMs x resident blocks, each block taking tiles from an atomic
counter until the work runs out.

Teaches the grid-size strategy the chapter contrasts with one block per output tile: launch
exactly one full wave (setup() reads DeviceLimits.sm_count and max_blocks_per_sm for this
kernel) and let each block loop, claiming the next tile index with atomicAdd on a global
counter, so blocks balance themselves and start-up is paid once per block. It also shows the
only ways blocks of one grid talk to each other: atomics, and the "last block out" pattern
(a second counter and __threadfence) that lets one block read what all others finished.

What it computes: tiles are `tile` consecutive floats (the last may be shorter); the kernel
writes y = x * 2 + 1 (exact in float32: x * 2 is exact, so FMA or not gives the same result)
and counts visits per tile; the last block to finish copies the counts to `visits`. Checked:
y equals numpy's one-tile-at-a-time result exactly, and visits is all ones, i.e. every tile
was processed exactly once, none skipped and none twice, whatever block took it.

Memory bound: x is read once, y written once (the counters are a few KiB).
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

THREADS = 256  # kThreads in the .cu
EXACT = Tolerance(rtol=0.0, atol=0.0)  # 2x is exact, + 1 one rounding on both sides


def _case(n: int, tile: int) -> Case:
    return Case(f"n{n}_tile{tile}", {"n": n, "tile": tile}, tolerance=EXACT)


CASES = (
    # 256 MiB read + 256 MiB written in 8192 tiles of 32 KiB: ~8 tiles per block on the H200.
    _case(1 << 26, 8192),
    # 16385 small tiles fought over by ~1000 blocks: heavy counter traffic. The last tile holds
    # 3 elements, so it is scalar tail only.
    _case(4_194_307, 256),
    # Fewer tiles (123) than blocks: most blocks find the counter past the end at once and
    # leave. The last tile holds 577 elements: 144 float4s and a 1-element tail.
    _case(1_000_003, 8192),
    # A single, partial tile (5 elements): one block works, the rest only take a ticket.
    _case(5, 8192),
)


def _dims(case: Case) -> tuple[int, int, int]:
    tile = int(case.params["tile"])
    if tile <= 0 or tile % 4 != 0:
        raise ValueError(f"tile={tile}: must be a positive multiple of 4 (float4 tiles)")
    n = int32_param(case, "n", headroom=tile)  # whole tiles reach tile - 1 past n, in ints
    return n, tile, ceil_div(n, tile)


def setup(case: Case, rng: np.random.Generator, device: DeviceLimits) -> Problem:
    n, tile, ntiles = _dims(case)
    per_sm = device.max_blocks_per_sm("persistent_tiles", THREADS, 0)
    if per_sm < 1:
        raise ValueError("persistent_tiles: the device reports 0 resident blocks per SM")
    blocks = device.sm_count * per_sm  # one full wave, whatever the number of tiles
    x = rng.random(n, dtype=np.float32) * np.float32(2) - np.float32(1)  # [-1, 1)
    launch = Launch(
        entry="persistent_tiles",
        grid=(blocks, 1, 1),
        block=(THREADS, 1, 1),
        args=(
            Buf("x"),
            Buf("y"),
            Buf("visits"),
            Buf("counters"),
            Buf("visit_scratch"),
            Scalar(np.int32(n)),
            Scalar(np.int32(tile)),
            Scalar(np.int32(ntiles)),
        ),
    )
    return Problem(
        inputs={"x": x},
        outputs={
            "y": np.empty(n, dtype=np.float32),
            "visits": np.empty(ntiles, dtype=np.int32),
        },
        launches=(launch,),
        # Re-uploaded before every run: [next tile, finished blocks] and the per-tile counts.
        scratch={
            "counters": np.zeros(2, dtype=np.int32),
            "visit_scratch": np.zeros(ntiles, dtype=np.int32),
        },
    )


def reference(case: Case, inputs: Mapping[str, np.ndarray]) -> Mapping[str, np.ndarray]:
    _, tile, ntiles = _dims(case)
    x = inputs["x"]
    y = np.empty_like(x)
    for t in range(ntiles):  # one block per tile: the plain strategy, written plainly
        part = x[t * tile : (t + 1) * tile]
        y[t * tile : t * tile + part.size] = part * np.float32(2) + np.float32(1)
    return {"y": y, "visits": np.ones(ntiles, dtype=np.int32)}


def work(case: Case) -> Work:
    n, _, ntiles = _dims(case)
    return Work(bytes=2 * n * 4 + ntiles * 4)


SPEC = KernelSpec(
    cases=CASES,
    setup=setup,
    reference=reference,
    work=work,
    requires=None,
)
