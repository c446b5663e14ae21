"""Scale-bias: y = x * 2 + 1 on a float32 vector, one thread per element, with a bounds check.

Teaches the thread layer: each thread derives its element from blockIdx.x * blockDim.x +
threadIdx.x, the grid is rounded up to whole blocks, and `if (i < n)` stops the surplus threads
of the last block. Two entries:

- `scale_bias_vec4` (cases `*_vec4`): the same one-thread-per-element mapping where the element
  is a float4, plus a scalar tail of n % 4 floats handled by the next n % 4 threads. This is the
  form held to the bandwidth bar (>= 80 % of 4.3 TB/s on the 512 MiB case): a 4-byte access per
  thread leaves too few bytes in flight per SM to cover HBM latency, a 16-byte one does not.
- `scale_bias_scalar` (cases `*_scalar`): the chapter's literal kernel, one float per thread. Its
  large case is a contrast kept to show what the vector width buys; it is not held to the bar.

x * 2 is exact in float32, so y is bit-identical to numpy's float32 x * 2 + 1 (FMA or not).
Memory bound: x read once, y written once.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from harness.spec import (
    Buf,
    Case,
    DeviceLimits,
    KernelSpec,
    Launch,
    Problem,
    Scalar,
    Tolerance,
    Work,
    grid_1d,
    int32_param,
)

THREADS = 256
# x * 2 is exact and + 1 is one correctly rounded float32 add on both sides: compare bit-exactly.
EXACT = Tolerance(rtol=0.0, atol=0.0)

CASES = (
    # 256 MiB read + 256 MiB written: over 8x the H200's L2. The bandwidth case.
    Case("n67108864_vec4", {"n": 1 << 26, "vec": 4}, tolerance=EXACT),
    Case("n67108864_scalar", {"n": 1 << 26, "vec": 1}, tolerance=EXACT),
    # Not a multiple of the block (nor of 4): a partial last block and a 3-float scalar tail.
    Case("n1000003_vec4", {"n": 1_000_003, "vec": 4}, tolerance=EXACT),
    Case("n1000003_scalar", {"n": 1_000_003, "vec": 1}, tolerance=EXACT),
    # A single element: one block of which only thread 0 works (in vec4: the tail path only).
    Case("n1_vec4", {"n": 1, "vec": 4}, tolerance=EXACT),
    Case("n1_scalar", {"n": 1, "vec": 1}, tolerance=EXACT),
)


def _params(case: Case) -> tuple[int, int]:
    n, vec = int32_param(case, "n"), int(case.params["vec"])
    if vec not in (1, 4):
        raise ValueError(f"vec={vec}: 1 (scalar) or 4 (float4)")
    return n, vec


def setup(case: Case, rng: np.random.Generator, device: DeviceLimits) -> Problem:
    n, vec = _params(case)
    x = rng.standard_normal(n, dtype=np.float32)
    if vec == 4:
        threads_needed = n // 4 + n % 4  # one per float4, then one per leftover float
        entry = "scale_bias_vec4"
    else:
        threads_needed = n
        entry = "scale_bias_scalar"
    launch = Launch(
        entry=entry,
        grid=grid_1d(threads_needed, THREADS),
        block=(THREADS, 1, 1),
        args=(Buf("x"), Buf("y"), Scalar(np.int32(n))),
    )
    return Problem(
        inputs={"x": x}, outputs={"y": np.empty(n, dtype=np.float32)}, launches=(launch,)
    )


def reference(case: Case, inputs: Mapping[str, np.ndarray]) -> Mapping[str, np.ndarray]:
    x = inputs["x"]
    return {"y": (x * np.float32(2.0) + np.float32(1.0)).astype(np.float32)}


def work(case: Case) -> Work:
    n, _ = _params(case)
    return Work(bytes=2 * n * 4)


SPEC = KernelSpec(
    cases=CASES,
    setup=setup,
    reference=reference,
    work=work,
    requires=None,
)
