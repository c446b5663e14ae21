"""Thread IDs: each thread writes (blockIdx.x, threadIdx.x, warp rank, lane) (exercise 1).

Teaches how a 1-D launch numbers its threads and how a block is cut into warps: warp rank =
threadIdx.x / 32 within the block, lane = threadIdx.x % 32. The kernel reads the lane from the
hardware's %laneid register, so the check confirms that warps are made of 32 consecutive threads
rather than repeating the arithmetic. With a block of 100 threads the last warp of every block
is partial (lanes 0..3 of warp 3).

Output: int32 ids[grid * block, 4], row t = blockIdx.x * blockDim.x + threadIdx.x holding
(blockIdx.x, threadIdx.x, threadIdx.x // 32, threadIdx.x % 32); compared exactly.
Not about bandwidth: the typical case writes 32 MiB so that the timing means something.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from harness.spec import Buf, Case, DeviceLimits, KernelSpec, Launch, Problem, Work

CASES = (
    # 2M threads, 32 MiB of ids.
    Case("grid8192_block256", {"grid": 8192, "block": 256}),
    # Block size not a multiple of 32: each block ends with a 4-thread warp.
    Case("grid1000_block100", {"grid": 1000, "block": 100}),
    # The largest block, a single one: warps 0..31 all full.
    Case("grid1_block1024", {"grid": 1, "block": 1024}),
    # One thread: a warp of one lane.
    Case("grid1_block1", {"grid": 1, "block": 1}),
)


def _dims(case: Case) -> tuple[int, int]:
    grid, block = int(case.params["grid"]), int(case.params["block"])
    if not (0 < grid < 2**31 and 0 < block <= 1024):
        raise ValueError(f"grid={grid}, block={block}: outside CUDA's 1-D launch limits")
    return grid, block


def setup(case: Case, rng: np.random.Generator, device: DeviceLimits) -> Problem:
    grid, block = _dims(case)
    launch = Launch(entry="thread_ids", grid=(grid, 1, 1), block=(block, 1, 1), args=(Buf("ids"),))
    return Problem(
        inputs={},
        outputs={"ids": np.empty((grid * block, 4), dtype=np.int32)},
        launches=(launch,),
    )


def reference(case: Case, inputs: Mapping[str, np.ndarray]) -> Mapping[str, np.ndarray]:
    grid, block = _dims(case)
    t = np.arange(grid * block, dtype=np.int64)
    block_idx, thread_idx = t // block, t % block
    ids = np.stack([block_idx, thread_idx, thread_idx // 32, thread_idx % 32], axis=1)
    return {"ids": ids.astype(np.int32)}


def work(case: Case) -> Work:
    grid, block = _dims(case)
    return Work(bytes=grid * block * 16)


SPEC = KernelSpec(
    cases=CASES,
    setup=setup,
    reference=reference,
    work=work,
    requires=None,
)
