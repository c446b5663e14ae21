"""Cluster pair sum: two blocks of a thread block cluster combine partials through DSMEM.

Teaches thread block clusters and distributed shared memory (sm_90+): a kernel compiled with
`__cluster_dims__(2, 1, 1)`, `cg::this_cluster()` and `block_rank()`, `cluster.sync()` as the
cluster-wide barrier that publishes one block's shared-memory writes to its peer, and
`map_shared_rank()` to read the peer block's shared memory. It also shows why a second
`cluster.sync()` is needed: rank 1 must not exit (releasing its shared memory) before rank 0
has read its partial.

Each block reduces `chunk` consecutive float32 elements (fewer or none at the tail) into a
shared-memory partial; cluster c (blocks 2c and 2c+1) writes the sum of
x[2c*chunk : (2c+2)*chunk] to sums[c]; every block writes its cluster rank to ranks[block],
which must read 0, 1, 0, 1, ... `chunk` must be a multiple of 4 (16-byte aligned float4 loads).
The cluster shape is compiled in, so the launch passes no cluster dimensions.

Memory bound: the input is read once.
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
    Scalar,
    Tolerance,
    Work,
    ceil_div,
    int32_param,
)

THREADS = 256  # kThreads in the .cu
CLUSTER = 2  # __cluster_dims__(2, 1, 1) in the .cu
FLOAT32_EPS = float(np.finfo(np.float32).eps)


def _tolerance(chunk: int) -> Tolerance:
    # The inputs are uniform in [0, 1): no cancellation, so the float32 sum's relative error is
    # bounded by (longest chain of dependent adds) * eps. A chain is one thread's sequential
    # float4 lane (chunk / (4 * THREADS) adds), its 2 lane-combining adds, 2 * 5 shuffle levels,
    # the scalar tail (<= 1) and the final pair add. For every case here the bound is below
    # 1e-5; rtol stays at docs/CONTRACT.md's 1e-4 and only grows if a long chunk ever needs it.
    chain = chunk // (4 * THREADS) + 2 + 10 + 1 + 1
    rtol = max(1e-4, 4.0 * chain * FLOAT32_EPS)
    return Tolerance(rtol=rtol, atol=1e-4)


def _case(name: str, n: int, chunk: int) -> Case:
    return Case(name, {"n": n, "chunk": chunk}, tolerance=_tolerance(chunk))


CASES = (
    # 256 MiB read: several times the H200's L2, 4096 clusters of 2 x 8192 elements.
    _case("67108864", n=1 << 26, chunk=8192),
    # Not a multiple of the cluster's 2*chunk: the last cluster's rank 0 gets 907 elements
    # (a float4 body plus a 3-element scalar tail) and its rank 1 gets none (partial 0).
    _case("5003", n=5003, chunk=1024),
    # A single cluster whose rank 1 holds only a partial slice.
    _case("1537", n=1537, chunk=1024),
)


def _dims(case: Case) -> tuple[int, int, int]:
    chunk = int(case.params["chunk"])
    if chunk % 4 != 0 or chunk <= 0:
        raise ValueError(f"chunk={chunk}: must be a positive multiple of 4 (float4 loads)")
    n = int32_param(case, "n")
    clusters = ceil_div(n, CLUSTER * chunk)
    return n, chunk, clusters


def setup(case: Case, rng: np.random.Generator, device: DeviceLimits) -> Problem:
    n, chunk, clusters = _dims(case)
    blocks = CLUSTER * clusters
    x = rng.random(n, dtype=np.float32)  # uniform [0, 1): see _tolerance
    launch = Launch(
        entry="cluster_pair_sum",
        grid=(blocks, 1, 1),  # counts blocks; even, as the compiled cluster shape requires
        block=(THREADS, 1, 1),
        args=(Buf("x"), Buf("sums"), Buf("ranks"), Scalar(np.int32(n)), Scalar(np.int32(chunk))),
        cluster=None,  # the shape comes from __cluster_dims__
    )
    return Problem(
        inputs={"x": x},
        outputs={
            "sums": np.empty(clusters, dtype=np.float32),
            "ranks": np.empty(blocks, dtype=np.int32),
        },
        launches=(launch,),
    )


def reference(case: Case, inputs: Mapping[str, np.ndarray]) -> Mapping[str, np.ndarray]:
    n, chunk, clusters = _dims(case)
    x = inputs["x"].astype(np.float64)
    span = CLUSTER * chunk
    sums = np.array([x[c * span : min((c + 1) * span, n)].sum() for c in range(clusters)])
    ranks = np.tile(np.arange(CLUSTER, dtype=np.int32), clusters)
    return {"sums": sums.astype(np.float32), "ranks": ranks}


def work(case: Case) -> Work:
    n, _, clusters = _dims(case)
    return Work(bytes=n * 4 + clusters * 4 + CLUSTER * clusters * 4)


SPEC = KernelSpec(
    cases=CASES,
    setup=setup,
    reference=reference,
    work=work,
    requires=RequireSm(9, 0),
)
