"""cub::BlockReduce<float, 256>: one partial sum per 1024-element tile, a header from CCCL."""

import numpy as np

from harness.spec import (
    Buf,
    Case,
    KernelSpec,
    Launch,
    Problem,
    Scalar,
    Tolerance,
    Work,
    ceil_div,
    int32_param,
)

THREADS, TILE = 256, 1024  # kThreads and kTile of the .cu

# Inputs in [0, 1): no cancellation, so a float32 sum's relative error is bounded by its longest
# chain of adds times eps: 3 adds per thread + 8 tree levels = 11 * 6e-8, about 7e-7.
SUM = Tolerance(rtol=1e-5, atol=1e-5)


def setup(case, rng, device):
    n = int32_param(case, "n")
    blocks = ceil_div(n, TILE)
    return Problem(
        inputs={"x": rng.random(n, dtype=np.float32)},
        outputs={"sums": np.empty(blocks, np.float32)},
        launches=(
            Launch(
                "cub_block_sum",
                (blocks, 1, 1),
                (THREADS, 1, 1),
                (Buf("x"), Buf("sums"), Scalar(np.int32(n))),
            ),
        ),
    )


def reference(case, inputs):
    x = inputs["x"].astype(np.float64)
    return {"sums": np.add.reduceat(x, np.arange(0, len(x), TILE)).astype(np.float32)}


SPEC = KernelSpec(
    cases=(
        Case("n16777216", {"n": 1 << 24}, SUM),
        Case("n1000003", {"n": 1_000_003}, SUM),  # the last tile holds 579 elements
        Case("n1", {"n": 1}, SUM),
    ),
    setup=setup,
    reference=reference,
    work=lambda case: Work(bytes=4 * case.params["n"], flops=case.params["n"]),
)
