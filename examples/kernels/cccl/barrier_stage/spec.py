"""Stage a tile in shared memory, meet at a cuda::barrier, write it back reversed."""

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

EXACT = Tolerance(0, 0)  # a permutation: every element moves unchanged


def setup(case, rng, device):
    n, threads = int32_param(case, "n"), case.params["threads"]
    launch = Launch(
        "barrier_stage",
        (ceil_div(n, threads), 1, 1),
        (threads, 1, 1),
        (Buf("x"), Buf("y"), Scalar(np.int32(n))),
        shmem_bytes=4 * threads,  # the tile, one float per thread
    )
    return Problem(
        inputs={"x": rng.standard_normal(n, dtype=np.float32)},
        outputs={"y": np.empty(n, np.float32)},
        launches=(launch,),
    )


def reference(case, inputs):
    x, threads = inputs["x"], case.params["threads"]
    full = len(x) - len(x) % threads
    # each full tile reversed, then the short last one within itself
    whole = x[:full].reshape(-1, threads)[:, ::-1].ravel()
    return {"y": np.concatenate([whole, x[full:][::-1]])}


SPEC = KernelSpec(
    cases=(
        Case("n16777216", {"n": 1 << 24, "threads": 256}, EXACT),
        Case("n1000003_threads1024", {"n": 1_000_003, "threads": 1024}, EXACT),  # 579 left
        Case("n1000003_threads96", {"n": 1_000_003, "threads": 96}, EXACT),  # 3 warps, 67 left
        Case("n1", {"n": 1, "threads": 256}, EXACT),
    ),
    setup=setup,
    reference=reference,
    work=lambda case: Work(bytes=8 * case.params["n"]),
)
