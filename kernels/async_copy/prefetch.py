"""The problem of the chapter's two prefetch kernels: prefetch_pipeline writes the num_stages-deep
prefetch loop with cuda::pipeline, prefetch_cp_async_ptx with the PTX it compiles to. Only the
copy mechanics differ, so they share the cases, the check and the work (prefetch.cuh shares the
batches and the computation).

What it computes (the chapter leaves the per-batch computation open): out[i] = 2 * in[i] + 1 for
every element, int32 in and out, compared exactly. Inputs are drawn from [-2**29, 2**29) so the
result never overflows. One grid-wide batch is gridDim.x * 256 int4 vectors; thread t of block b
owns vector (batch * gridDim.x + b) * 256 + t of every batch, so a block's share of a batch is
contiguous and the batches stride over the grid. The last batch may be partial, and the
n % 4 elements past the last whole int4 are done with plain loads by block 0.

Cases: for each of num_stages = 2, 3, 4 (a separate entry each), a large case whose grid fills the
device (SMs x resident blocks, each thread then streams ~60 batches) and two edges on small fixed
grids: fewer batches than stages (one partial batch and a 1-element tail; the prologue commits
empty groups), and 5 full batches plus a partial sixth with a 3-element tail.

Memory bound: in read once, out written once (8 bytes per element). The large case should run
near the DRAM roofline: every resident thread keeps num_stages 16-byte copies in flight.
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
    Work,
    int32_param,
)

THREADS = 256  # kThreads in prefetch.cuh
STAGES = (2, 3, 4)
VEC = 4  # int32 elements per 16-byte copy


def _case(n: int, stages: int, blocks: int | None) -> Case:
    # blocks=None: as many blocks as the device keeps resident at once (read in setup).
    return Case(f"n{n}_stages{stages}", {"n": n, "stages": stages, "blocks": blocks})


CASES = tuple(
    case
    for stages in STAGES
    for case in (
        # 2**26 int32: 256 MiB read + 256 MiB written, several times the H200's L2.
        _case(1 << 26, stages, None),
        # 2 blocks x 256 threads = 512 vectors per batch, but only 250 whole vectors: a single
        # partial batch (fewer batches than stages) plus a 1-element scalar tail.
        _case(1001, stages, 2),
        # 4 blocks: 1024 vectors per batch; 5420 vectors = 5 full batches + 300 of a sixth,
        # plus a 3-element scalar tail.
        _case(4 * THREADS * VEC * 5 + 300 * VEC + 3, stages, 4),
    )
)


def _params(case: Case) -> tuple[int, int]:
    stages = int(case.params["stages"])
    if stages not in STAGES:
        raise ValueError(f"stages={stages}: the .cu has entries for {STAGES}")
    return int32_param(case, "n"), stages


def reference(case: Case, inputs: Mapping[str, np.ndarray]) -> Mapping[str, np.ndarray]:
    x = inputs["in"]
    # |x| < 2**29, so 2x + 1 fits int32 and numpy's int32 arithmetic is exact.
    return {"out": x * np.int32(2) + np.int32(1)}


def work(case: Case) -> Work:
    n, _ = _params(case)
    return Work(bytes=2 * n * 4)


def prefetch_spec(prefix: str) -> KernelSpec:
    """The spec of the prefetch kernel `prefix` (its folder and .cu), whose entries are
    `<prefix>_stages{2,3,4}`."""

    def setup(case: Case, rng: np.random.Generator, device: DeviceLimits) -> Problem:
        n, stages = _params(case)
        entry = f"{prefix}_stages{stages}"
        shmem = stages * THREADS * 16  # one int4 slot per thread and stage
        blocks = case.params["blocks"]
        if blocks is None:
            blocks = device.sm_count * max(1, device.max_blocks_per_sm(entry, THREADS, shmem))
        x = rng.integers(-(2**29), 2**29, size=n, dtype=np.int32)
        launch = Launch(
            entry=entry,
            grid=(int(blocks), 1, 1),
            block=(THREADS, 1, 1),
            args=(Buf("out"), Buf("in"), Scalar(np.int32(n))),
            shmem_bytes=shmem,
        )
        return Problem(
            inputs={"in": x}, outputs={"out": np.empty(n, dtype=np.int32)}, launches=(launch,)
        )

    return KernelSpec(
        cases=CASES, setup=setup, reference=reference, work=work, requires=RequireSm(8, 0)
    )
