"""Cluster DSMEM exchange: two blocks of a cluster read each other's shared memory (exercise 3).

Teaches distributed shared memory (sm_90+) with the smallest possible kernel: a cluster of two
blocks (`__cluster_dims__(2, 1, 1)`), each filling its own shared-memory tile, `cluster.sync()`
so the tile is visible to the peer, `cluster.map_shared_rank(tile, rank ^ 1)` to read the peer's
tile as if it were local, and a second `cluster.sync()` so that no block exits (freeing its
tile) while the other is still reading it. The exercise asks for block 1 to read block 0; the
kernel does both directions at once.

What it computes, for x and y of shape (2 * clusters, elems) float32 (elems a multiple of 4):
block b = 2c + r fills tile = 2 * x[b] + (r + 1) and writes the peer's tile to y[b], so
  y[2c + 1] = 2 * x[2c] + 1   (rank 1 reads what rank 0 wrote)
  y[2c]     = 2 * x[2c + 1] + 2   (and rank 0 reads rank 1)
2 * x is exact in float32 and the add rounds once, on the GPU (as an FMA) and in numpy alike,
so the result is exact. Reading the block's own tile, or the peer's before it is written,
gives other numbers.

Not a bandwidth kernel, but the typical case moves 128 MiB so the DSMEM round trip's cost
shows up against a plain copy.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from harness.spec import (
    Buf,
    Case,
    DeviceLimits,
    DeviceUnsupported,
    KernelSpec,
    Launch,
    Problem,
    RequireSm,
    Scalar,
    Tolerance,
    Work,
)

THREADS = 256  # kThreads in the .cu
CLUSTER = 2  # __cluster_dims__(2, 1, 1) in the .cu


def _case(clusters: int, elems: int) -> Case:
    # Exact: every output is a copy of a value computed identically on both sides (docstring).
    return Case(
        f"clusters{clusters}_elems{elems}",
        {"clusters": clusters, "elems": elems},
        tolerance=Tolerance(rtol=0.0, atol=0.0),
    )


CASES = (
    # 4096 blocks with a 16 KiB tile each: 64 MiB read, 64 MiB written.
    _case(2048, 4096),
    # Edge: a single cluster, 1024 floats (exactly one float4 per thread).
    _case(1, 1024),
    # Edge: 250 float4 per tile, fewer than the 256 threads; an odd number of clusters.
    _case(3, 1000),
    # 64 KiB tiles: above the 48 KiB default, so the launch opts in to more shared memory.
    _case(64, 16384),
)


def _dims(case: Case) -> tuple[int, int]:
    clusters, elems = int(case.params["clusters"]), int(case.params["elems"])
    if clusters <= 0 or elems <= 0 or elems % 4 != 0:
        raise ValueError(f"clusters={clusters}, elems={elems}: elems must be a multiple of 4")
    return clusters, elems


def setup(case: Case, rng: np.random.Generator, device: DeviceLimits) -> Problem:
    clusters, elems = _dims(case)
    shmem = elems * 4
    if shmem > device.smem_optin_bytes:
        raise DeviceUnsupported(
            f"a {shmem}-byte tile exceeds this device's {device.smem_optin_bytes}-byte limit"
        )
    blocks = CLUSTER * clusters
    x = rng.standard_normal((blocks, elems), dtype=np.float32)
    launch = Launch(
        entry="cluster_dsmem_exchange",
        grid=(blocks, 1, 1),  # counts blocks; even, as the compiled cluster shape requires
        block=(THREADS, 1, 1),
        args=(Buf("x"), Buf("y"), Scalar(np.int32(elems))),
        cluster=None,  # the shape comes from __cluster_dims__
        shmem_bytes=shmem,  # the tile; the harness opts in above 48 KiB
    )
    return Problem(
        inputs={"x": x},
        outputs={"y": np.empty((blocks, elems), dtype=np.float32)},
        launches=(launch,),
    )


def reference(case: Case, inputs: Mapping[str, np.ndarray]) -> Mapping[str, np.ndarray]:
    clusters, _ = _dims(case)
    x = inputs["x"]
    rank = np.arange(CLUSTER * clusters) % CLUSTER
    bias = (rank + 1).astype(np.float32)[:, None]
    tiles = x * np.float32(2.0) + bias  # what each block writes into its own shared memory
    peer = np.arange(CLUSTER * clusters) ^ 1  # the block in the same cluster with the other rank
    return {"y": tiles[peer].astype(np.float32)}


def work(case: Case) -> Work:
    clusters, elems = _dims(case)
    return Work(bytes=2 * CLUSTER * clusters * elems * 4)


SPEC = KernelSpec(
    cases=CASES,
    setup=setup,
    reference=reference,
    work=work,
    requires=RequireSm(9, 0),
)
