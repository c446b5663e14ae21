"""TMA add-one: a 2-D box moved by the Tensor Memory Accelerator, y = x + 1 (float32).

Teaches the Hopper TMA round trip: a host-built tensor map passed as a `__grid_constant__`
CUtensorMap, one thread issuing a 2-D bulk tensor load into shared memory, an mbarrier armed
with the box's byte count (`arrive.expect_tx`) and waited on by parity, the proxy fences that
make generic-proxy shared-memory writes visible to the TMA engine (and the barrier init before
it), and the TMA store with `commit_group` / `wait_group.read` before the block may exit.

Each block handles one 64 x 64 box. The grid covers the tensor with ceil(rows/64) x
ceil(cols/64) boxes; partial boxes on the bottom and right edges rely on TMA zero-filling
out-of-bounds reads and clipping out-of-bounds writes. The tensor map's row stride (cols * 4
bytes) must be a multiple of 16, so `cols` must be a multiple of 4.

Memory bound: one read and one write of the tensor.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from harness.spec import (
    Case,
    DeviceLimits,
    KernelSpec,
    Launch,
    Problem,
    RequireSm,
    TensorMap,
    Work,
    grid_2d,
)

BOX = (64, 64)  # (rows, cols); must match kBoxRows / kBoxCols in the .cu
THREADS = 128  # kThreads in the .cu

CASES = (
    # 512 MiB moved (256 MiB read, 256 MiB written): far larger than the H200's L2.
    Case("8192x8192", {"rows": 8192, "cols": 8192}),
    # Neither dimension is a multiple of the box: the last row and column of boxes are partial.
    Case("1000x1000", {"rows": 1000, "cols": 1000}),
    # Fewer rows than one box, cols % 64 != 0: a single row of partial boxes.
    Case("37x1028", {"rows": 37, "cols": 1028}),
)


def _shape(case: Case) -> tuple[int, int]:
    rows, cols = int(case.params["rows"]), int(case.params["cols"])
    if cols % 4 != 0:
        raise ValueError(f"cols={cols}: the TMA row stride (cols*4 bytes) must be a multiple of 16")
    return rows, cols


def setup(case: Case, rng: np.random.Generator, device: DeviceLimits) -> Problem:
    rows, cols = _shape(case)
    x = rng.standard_normal((rows, cols), dtype=np.float32)
    y = np.empty((rows, cols), dtype=np.float32)
    launch = Launch(
        entry="tma_add_one",
        grid=grid_2d(cols, rows, BOX[1], BOX[0]),  # x: box columns, y: box rows
        block=(THREADS, 1, 1),
        args=(TensorMap("x", box=BOX), TensorMap("y", box=BOX)),
    )
    return Problem(inputs={"x": x}, outputs={"y": y}, launches=(launch,))


def reference(case: Case, inputs: Mapping[str, np.ndarray]) -> Mapping[str, np.ndarray]:
    # float32 + 1.0f is a single correctly rounded add on both sides: the result is exact.
    return {"y": (inputs["x"] + np.float32(1.0)).astype(np.float32)}


def work(case: Case) -> Work:
    rows, cols = _shape(case)
    return Work(bytes=2 * rows * cols * 4)


SPEC = KernelSpec(
    cases=CASES,
    setup=setup,
    reference=reference,
    work=work,
    requires=RequireSm(9, 0),
)
