"""Cluster dynamic launch: the cluster shape is a launch attribute, not part of the kernel.

Teaches the second way to form thread block clusters (sm_90+): the kernel has no
`__cluster_dims__`, and the host passes the shape at launch (`cudaLaunchKernelEx` with
`cudaLaunchAttributeClusterDimension`; here `Launch.cluster`), so one binary runs with clusters
of 2x1, 4x1, 2x2, 1x4 or 8x1 blocks. Clusters above 8 blocks are non-portable: the 4x4 case
needs the opt-in the harness makes and is skipped `device-unsupported` where the GPU cannot
place 16 blocks in one GPC (H100/H200 can).

Each block reports the same values as cluster_static, read from the hardware through
cooperative groups. What is checked, exactly (integers), for a grid of GX x GY blocks of
32 x 8 threads and a cluster (CX, CY, 1):
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

BLOCK = (32, 8)  # (kBlockX, kBlockY) in the .cu
FIELDS = 10  # kFields in the .cu


def _case(gx: int, gy: int, cx: int, cy: int) -> Case:
    return Case(f"grid{gx}x{gy}_cluster{cx}x{cy}", {"gx": gx, "gy": gy, "cx": cx, "cy": cy})


CASES = (
    # 8192 blocks, 2 Mi threads (8 MiB of thread ranks) cut into clusters of different shapes.
    _case(128, 64, 2, 1),
    _case(128, 64, 4, 1),
    _case(128, 64, 2, 2),
    # A column cluster: with CX = 1 the rank runs along y.
    _case(128, 64, 1, 4),
    # 16 blocks: non-portable, opted in by the harness; 256 clusters.
    _case(64, 64, 4, 4),
    # Edges: one cluster of the largest portable size, and one cluster of two blocks.
    _case(8, 1, 8, 1),
    _case(2, 1, 2, 1),
)


def _dims(case: Case) -> tuple[int, int, int, int]:
    gx, gy = int(case.params["gx"]), int(case.params["gy"])
    cx, cy = int(case.params["cx"]), int(case.params["cy"])
    if min(gx, gy, cx, cy) <= 0 or gx % cx or gy % cy:
        raise ValueError(f"grid {gx}x{gy} must be a positive multiple of the cluster {cx}x{cy}")
    if cx * cy > 16:
        raise ValueError(f"cluster {cx}x{cy}: no GPU places more than 16 blocks in a cluster")
    return gx, gy, cx, cy


def setup(case: Case, rng: np.random.Generator, device: DeviceLimits) -> Problem:
    gx, gy, cx, cy = _dims(case)
    launch = Launch(
        entry="cluster_dynamic_launch",
        grid=(gx, gy, 1),  # counts blocks; the harness divides by the cluster shape
        block=(BLOCK[0], BLOCK[1], 1),
        args=(Buf("block_info"), Buf("thread_ranks")),
        cluster=(cx, cy, 1),  # the launch attribute that forms the clusters
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
    gx, gy, cx, cy = _dims(case)
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
    gx, gy, _, _ = _dims(case)
    blocks = gx * gy
    return Work(bytes=blocks * FIELDS * 4 + blocks * BLOCK[0] * BLOCK[1] * 4)


SPEC = KernelSpec(
    source="cluster_dynamic_launch.cu",
    cases=CASES,
    setup=setup,
    reference=reference,
    work=work,
    requires=RequireSm(9, 0),
)
