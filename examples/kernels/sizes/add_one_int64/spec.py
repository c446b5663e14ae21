"""A byte-wise y = x + 1 over more than 2^31 elements: a kernel that takes its count as
`long long`, given as Scalar(np.int64(n)) after int64_param checked it."""

import numpy as np

from harness.spec import Buf, Case, KernelSpec, Launch, Problem, Scalar, Work, ceil_div, int64_param

THREADS = 256
BLOCKS = 8192  # a grid-stride loop: a fixed grid, whatever n


def setup(case, rng, device):
    n = int64_param(case, "n")
    args = (Buf("x"), Buf("y"), Scalar(np.int64(n)))
    grid = (min(BLOCKS, ceil_div(n, THREADS)), 1, 1)
    return Problem(
        inputs={"x": rng.integers(0, 256, n, dtype=np.uint8)},
        outputs={"y": np.empty(n, np.uint8)},
        launches=(Launch("add_one_int64", grid, (THREADS, 1, 1), args),),
    )


def reference(case, inputs):
    return {"y": inputs["x"] + np.uint8(1)}  # 255 + 1 wraps to 0, as the kernel's cast does


SPEC = KernelSpec(
    cases=(
        Case("n2147483711", {"n": 2**31 + 63}),  # the last 64 elements lie past INT32_MAX
        Case("n1000003", {"n": 1_000_003}),
        Case("n1", {"n": 1}),
    ),
    setup=setup,
    reference=reference,
    work=lambda case: Work(bytes=2 * case.params["n"]),
    device_bytes=lambda case: 2 * case.params["n"],
)
