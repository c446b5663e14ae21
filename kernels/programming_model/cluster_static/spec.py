"""Cluster static: `__cluster_dims__(2, 2, 1)` compiled in; every block reports its cluster ids.

Teaches the first way to form thread block clusters (sm_90+): the shape is part of the kernel,
so the host launches a plain grid and the hardware cuts it into 2 x 2 groups of blocks. Each
block reads back, through cooperative groups, its rank inside the cluster (`block_rank()`,
linear with x fastest), its (x, y) position inside the cluster (`block_index()`), which cluster
it belongs to (`this_grid().cluster_index()` and `cluster_rank()`), the cluster shape
(`dim_blocks()`, `num_blocks()`) and the number of clusters; every thread writes its
`thread_rank()` within the cluster.

What is checked, exactly (integers), for a grid of GX x GY blocks of 32 x 8 threads:
  block_info[by, bx] = (bx % 2 + 2 * (by % 2), bx % 2, by % 2, bx // 2, by // 2,
                        bx // 2 + (GX // 2) * (by // 2), 2, 2, 4, (GX // 2) * (GY // 2))
  thread_ranks[y, x] = block_rank * 256 + (y % 8) * 32 + x % 32   (global thread coordinates)

Not a bandwidth kernel: the typical case writes 8 MiB so that its timing means something.
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
    RequireSm,
    Work,
)

BLOCK = (32, 8)  # (kBlockX, kBlockY) in the .cu
CLUSTER = (2, 2)  # __cluster_dims__(2, 2, 1) in the .cu
FIELDS = 10  # kFields in the .cu


def _case(gx: int, gy: int) -> Case:
    return Case(f"grid{gx}x{gy}", {"gx": gx, "gy": gy})


CASES = (
    # 8192 blocks (2048 clusters), 2 Mi threads: 8 MiB of thread ranks.
    _case(128, 64),
    # A small non-square grid: 4 x 3 clusters.
    _case(8, 6),
    # Edge: exactly one cluster.
    _case(2, 2),
)


def _grid(case: Case) -> tuple[int, int]:
    gx, gy = int(case.params["gx"]), int(case.params["gy"])
    if gx % CLUSTER[0] or gy % CLUSTER[1] or gx <= 0 or gy <= 0:
        raise ValueError(f"grid {gx}x{gy} must be a positive multiple of the cluster {CLUSTER}")
    return gx, gy


def setup(case: Case, rng: np.random.Generator, device: DeviceLimits) -> Problem:
    gx, gy = _grid(case)
    launch = Launch(
        entry="cluster_static",
        grid=(gx, gy, 1),  # counts blocks; the compiled cluster shape divides it
        block=(BLOCK[0], BLOCK[1], 1),
        args=(Buf("block_info"), Buf("thread_ranks")),
        cluster=None,  # the shape comes from __cluster_dims__
    )
    return Problem(
        inputs={},
        outputs={
            "block_info": np.empty((gy, gx, FIELDS), dtype=np.int32),
            "thread_ranks": np.empty((gy * BLOCK[1], gx * BLOCK[0]), dtype=np.int32),
        },
        launches=(launch,),
    )


def reference(case: Case, inputs: Mapping[str, np.ndarray]) -> Mapping[str, np.ndarray]:
    gx, gy = _grid(case)
    cx, cy = CLUSTER
    by, bx = np.meshgrid(np.arange(gy), np.arange(gx), indexing="ij")  # block coordinates
    rank = bx % cx + cx * (by % cy)  # block_rank: linear position in the cluster, x fastest
    clusters_x, clusters_y = gx // cx, gy // cy
    info = np.stack(
        [
            rank,
            bx % cx,
            by % cy,
            bx // cx,
            by // cy,
            bx // cx + clusters_x * (by // cy),
            np.full_like(bx, cx),
            np.full_like(bx, cy),
            np.full_like(bx, cx * cy),
            np.full_like(bx, clusters_x * clusters_y),
        ],
        axis=-1,
    ).astype(np.int32)

    # Thread (y, x) of the whole grid lives in block (y // 8, x // 32) at (y % 8, x % 32).
    ty, tx = np.meshgrid(np.arange(gy * BLOCK[1]), np.arange(gx * BLOCK[0]), indexing="ij")
    block_rank = rank[ty // BLOCK[1], tx // BLOCK[0]]
    threads = BLOCK[0] * BLOCK[1]
    thread_ranks = block_rank * threads + (ty % BLOCK[1]) * BLOCK[0] + tx % BLOCK[0]
    return {"block_info": info, "thread_ranks": thread_ranks.astype(np.int32)}


def work(case: Case) -> Work:
    gx, gy = _grid(case)
    blocks = gx * gy
    return Work(bytes=blocks * FIELDS * 4 + blocks * BLOCK[0] * BLOCK[1] * 4)


SPEC = KernelSpec(
    source="cluster_static.cu",
    cases=CASES,
    setup=setup,
    reference=reference,
    work=work,
    requires=RequireSm(9, 0),
)
