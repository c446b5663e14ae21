import numpy as np
from harness.spec import Buf, Case, KernelSpec, Launch, Problem, Scalar, Work

def setup(case, rng, device):
    n = case.params["n"]
    args = (Scalar(np.float32(2)), Buf("x"), Buf("y"), Buf("out"), Scalar(np.int32(n)))
    return Problem(
        inputs={v: rng.standard_normal(n, dtype=np.float32) for v in ("x", "y")},
        outputs={"out": np.empty(n, np.float32)},
        launches=(Launch("saxpy", ((n + 255) // 256, 1, 1), (256, 1, 1), args),))

SPEC = KernelSpec(
    source="saxpy.cu", cases=(Case("n1M", {"n": 1 << 20}), Case("n1", {"n": 1})),
    setup=setup, reference=lambda case, v: {"out": np.float32(2) * v["x"] + v["y"]},
    work=lambda case: Work(bytes=12 * case.params["n"]))
