"""The problem of cluster_static and cluster_dynamic_launch: every block of a GX x GY grid of
32 x 8-thread blocks reports where the hardware placed it in its thread block cluster, and every
thread its rank in the cluster. The two kernels run the same code (cluster_ids.cuh) and differ
only in where the cluster shape comes from: compiled in (`__cluster_dims__`) or given at launch.

What is checked, exactly (integers), for a cluster (CX, CY, 1):
  block_info[by, bx] = (bx % CX + CX * (by % CY), bx % CX, by % CY, bx // CX, by // CY,
                        bx // CX + (GX // CX) * (by // CY), CX, CY, CX * CY,
                        (GX // CX) * (GY // CY))
  thread_ranks[y, x] = block_rank * 256 + (y % 8) * 32 + x % 32   (global thread coordinates)

Not a bandwidth kernel: the typical cases write 8 MiB so that their timing means something.
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

BLOCK = (32, 8)  # (kBlockX, kBlockY) in cluster_ids.cuh
FIELDS = 10  # kFields in cluster_ids.cuh


def cluster_ids_spec(
    entry: str, cases: tuple[Case, ...], *, compiled_cluster: tuple[int, int] | None = None
) -> KernelSpec:
    """The spec of `entry`, whose cases give the grid (gx, gy) and, unless the kernel has
    `__cluster_dims__(*compiled_cluster, 1)`, the cluster (cx, cy) the launch asks for."""

    def dims(case: Case) -> tuple[int, int, int, int]:
        gx, gy = int(case.params["gx"]), int(case.params["gy"])
        cx, cy = compiled_cluster or (int(case.params["cx"]), int(case.params["cy"]))
        if min(gx, gy, cx, cy) <= 0 or gx % cx or gy % cy:
            raise ValueError(f"grid {gx}x{gy} must be a positive multiple of the cluster {cx}x{cy}")
        if cx * cy > 16:
            raise ValueError(f"cluster {cx}x{cy}: no GPU places more than 16 blocks in a cluster")
        return gx, gy, cx, cy

    def setup(case: Case, rng: np.random.Generator, device: DeviceLimits) -> Problem:
        gx, gy, cx, cy = dims(case)
        launch = Launch(
            entry=entry,
            grid=(gx, gy, 1),  # counts blocks; the cluster shape divides it
            block=(BLOCK[0], BLOCK[1], 1),
            args=(Buf("block_info"), Buf("thread_ranks")),
            # None: the shape comes from __cluster_dims__; else the launch attribute forms them
            cluster=None if compiled_cluster else (cx, cy, 1),
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
        gx, gy, cx, cy = dims(case)
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
        gx, gy, _, _ = dims(case)
        blocks = gx * gy
        return Work(bytes=blocks * FIELDS * 4 + blocks * BLOCK[0] * BLOCK[1] * 4)

    return KernelSpec(
        cases=cases, setup=setup, reference=reference, work=work, requires=RequireSm(9, 0)
    )
