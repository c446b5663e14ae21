"""y = x + 1 with device printf from the first four blocks: the lines land in the case's output
(JUnit system-out), 8 KiB of them at most, with a larger printf buffer asked of the context."""

import numpy as np

from harness.spec import (
    Buf,
    Case,
    ContextLimits,
    KernelSpec,
    Launch,
    Problem,
    Scalar,
    Work,
    grid_1d,
)


def setup(case, rng, device):
    n = case.params["n"]
    args = (Buf("x"), Buf("y"), Scalar(np.int32(n)))
    return Problem(
        inputs={"x": rng.standard_normal(n, dtype=np.float32)},
        outputs={"y": np.empty(n, np.float32)},
        launches=(Launch("device_printf", grid_1d(n, 256), (256, 1, 1), args),),
    )


SPEC = KernelSpec(
    context=ContextLimits(printf_fifo_bytes=4 << 20),
    cases=(Case("n1M", {"n": 1 << 20}), Case("n1000", {"n": 1000})),
    setup=setup,
    reference=lambda case, inputs: {"y": inputs["x"] + np.float32(1)},
    work=lambda case: Work(bytes=8 * case.params["n"]),
)
