"""Warp broadcast: `__shfl_sync` from lane 0, out[i] = x[32 * (i // 32)] (float32).

Teaches the warp layer's register-to-register exchange: each lane holds its own x[i], and one
`__shfl_sync(mask, v, 0)` hands lane 0's value to the whole warp without shared memory. It also
teaches the mask rule for a partial last group of 32 (n % 32 != 0), in two entries:

- `warp_broadcast_pad` (cases `*_pad`): lanes past n stay alive, skip the load and store, and
  take part in a full-mask shuffle.
- `warp_broadcast_mask` (cases `*_mask`): lanes past n sit the shuffle out and the rest shuffle
  with a mask of exactly the in-range lanes 0..k-1 (k = n - 32g in the last group g).

Each warp handles 8 consecutive groups of 32, loading all 8 before the first shuffle, so that
enough loads are in flight to keep HBM busy (the .cu says why). The output is lane 0's bits
moved unchanged, so it matches exactly. Bandwidth is reported (x read and out written once), but
the point is the shuffle.
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

THREADS = 256  # kThreads in the .cu; a multiple of 32
GROUPS = 8  # kGroups in the .cu: 32-element groups per warp


EXACT = Tolerance(rtol=0.0, atol=0.0)  # a shuffle moves bits; nothing is rounded


def _case(n: int, variant: str) -> Case:
    return Case(f"n{n}_{variant}", {"n": n, "variant": variant}, tolerance=EXACT)


CASES = (
    # 128 MiB read + 128 MiB written.
    _case(1 << 25, "pad"),
    _case(1 << 25, "mask"),
    # 1000003 = 32 * 31250 + 3: a last group of 3 lanes; its warp's last 5 groups are past n.
    _case(1_000_003, "pad"),
    _case(1_000_003, "mask"),
    # 31 elements: a single group missing its last lane.
    _case(31, "pad"),
    _case(31, "mask"),
    # A single element: lane 0 broadcasts to itself only.
    _case(1, "pad"),
    _case(1, "mask"),
)


def _params(case: Case) -> tuple[int, str]:
    n, variant = int32_param(case, "n"), str(case.params["variant"])
    if variant not in ("pad", "mask"):
        raise ValueError(f"variant={variant!r}: 'pad' or 'mask'")
    return n, variant


def setup(case: Case, rng: np.random.Generator, device: DeviceLimits) -> Problem:
    n, variant = _params(case)
    x = rng.standard_normal(n, dtype=np.float32)
    launch = Launch(
        entry=f"warp_broadcast_{variant}",
        grid=grid_1d(n, THREADS * GROUPS),
        block=(THREADS, 1, 1),
        args=(Buf("x"), Buf("out"), Scalar(np.int32(n))),
    )
    return Problem(
        inputs={"x": x}, outputs={"out": np.empty(n, dtype=np.float32)}, launches=(launch,)
    )


def reference(case: Case, inputs: Mapping[str, np.ndarray]) -> Mapping[str, np.ndarray]:
    x = inputs["x"]
    first_of_warp = (np.arange(x.size, dtype=np.int64) // 32) * 32
    return {"out": x[first_of_warp].astype(np.float32)}


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
