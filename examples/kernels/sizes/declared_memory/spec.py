"""y = a * x, with the device memory of each case declared from the case alone (device_bytes):
the 400 GB case is skipped device-unsupported on any GPU smaller than that before setup() would
build 400 GB of host arrays; the others run."""

import numpy as np

from harness.spec import Buf, Case, KernelSpec, Launch, Problem, Scalar, Work, ceil_div, int64_param

THREADS = 256
BLOCKS = 8192


def bytes_of(case):
    return 2 * 4 * case.params["n"]  # x and y, float32


def setup(case, rng, device):
    n = int64_param(case, "n")
    args = (Buf("x"), Buf("y"), Scalar(np.float32(1.5)), Scalar(np.int64(n)))
    return Problem(
        inputs={"x": rng.standard_normal(n, dtype=np.float32)},
        outputs={"y": np.empty(n, np.float32)},
        launches=(
            Launch(
                "declared_memory", (min(BLOCKS, ceil_div(n, THREADS)), 1, 1), (THREADS, 1, 1), args
            ),
        ),
    )


SPEC = KernelSpec(
    cases=(
        Case("n50G", {"n": 50_000_000_000}),  # 400 GB: no GPU of today holds it
        Case("n16M", {"n": 1 << 24}),
        Case("n1", {"n": 1}),
    ),
    setup=setup,
    reference=lambda case, inputs: {"y": np.float32(1.5) * inputs["x"]},
    work=lambda case: Work(bytes=bytes_of(case)),
    device_bytes=bytes_of,
)
