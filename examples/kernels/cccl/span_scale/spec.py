"""y = a x through cuda::std::span views, the size a 64-bit size_t: libcu++ in device code."""

import numpy as np

from harness.spec import Buf, Case, KernelSpec, Launch, Problem, Scalar, Work, ceil_div

A = np.float32(1.75)


def setup(case, rng, device):
    n, threads = case.params["n"], case.params["threads"]
    args = (Buf("x"), Buf("y"), Scalar(A), Scalar(np.uint64(n)))  # size_t n
    return Problem(
        inputs={"x": rng.standard_normal(n, dtype=np.float32)},
        outputs={"y": np.empty(n, np.float32)},
        launches=(Launch("span_scale", (ceil_div(n, threads), 1, 1), (threads, 1, 1), args),),
    )


def reference(case, inputs):
    return {"y": A * inputs["x"]}  # one float32 product per element, as the kernel's


SPEC = KernelSpec(
    cases=(
        Case("n16777216", {"n": 1 << 24, "threads": 256}),
        Case("n1000003_threads128", {"n": 1_000_003, "threads": 128}),  # a short last tile
        Case("n1", {"n": 1, "threads": 256}),
    ),
    setup=setup,
    reference=reference,
    work=lambda case: Work(bytes=8 * case.params["n"], flops=case.params["n"]),
)
