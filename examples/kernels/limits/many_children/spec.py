"""y = 3x, a child grid per row launched from the device, 20,000 of them at once: the context
must queue more pending launches than its default 2,048 (ContextLimits.pending_launches)."""

import numpy as np

from harness.spec import (
    Buf,
    BuildOptions,
    Case,
    ContextLimits,
    KernelSpec,
    Launch,
    Problem,
    Scalar,
    Work,
    ceil_div,
)


def setup(case, rng, device):
    rows, cols = case.params["rows"], case.params["cols"]
    args = (Buf("x"), Buf("y"), Scalar(np.int32(rows)), Scalar(np.int32(cols)))
    return Problem(
        inputs={"x": rng.standard_normal((rows, cols), dtype=np.float32)},
        outputs={"y": np.empty((rows, cols), np.float32)},
        launches=(Launch("many_children", (ceil_div(rows, 128), 1, 1), (128, 1, 1), args),),
    )


SPEC = KernelSpec(
    build=BuildOptions(relocatable=True, libraries=("cudadevrt",)),
    context=ContextLimits(pending_launches=32768),
    cases=(
        Case("r20000_c64", {"rows": 20_000, "cols": 64}),
        Case("r1_c1", {"rows": 1, "cols": 1}),
    ),
    setup=setup,
    reference=lambda case, inputs: {"y": np.float32(3) * inputs["x"]},
    work=lambda case: Work(bytes=8 * case.params["rows"] * case.params["cols"]),
)
