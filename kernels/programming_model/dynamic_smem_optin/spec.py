"""Dynamic shared memory above 48 KB: `extern __shared__` sized at launch, opted in, up to the
device's limit.

Teaches the two ways to declare shared memory and the opt-in: a block gets up to 48 KB of
dynamic shared memory by default; more needs MAX_DYNAMIC_SHARED_SIZE_BYTES raised on the kernel
first (the harness does that for any Launch.shmem_bytes above 48 KB), up to the device's
sharedMemPerBlockOptin: 163 KB on sm_80, 227 KB on sm_90. The size is therefore not hard-coded:
setup() reads DeviceLimits.smem_optin_bytes, launches with it and passes the same number to the
kernel as `smem_bytes`.

What it computes: with chunk = smem_bytes / 4 floats, block c copies x[c*chunk : ...] (chunk
elements, fewer in the last block) into shared memory and writes them back reversed:
y[c*chunk + i] = x[c*chunk + count - 1 - i]. A kernel that staged less than the whole buffer
would reverse shorter pieces and fail, so a pass proves every byte of the buffer was used.
Exact comparison (pure data movement).

Memory bound, but not a bandwidth showcase: with one 227 KB block per SM each SM alternates a
load phase and a store phase instead of overlapping them; the point is the size, not speed.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from harness.spec import (
    Buf,
    Case,
    DeviceLimits,
    DeviceUnsupported,
    KernelSpec,
    Launch,
    Problem,
    Scalar,
    Tolerance,
    Work,
    grid_1d,
    int32_extent,
)

THREADS = 1024  # kThreads in the .cu
DEFAULT_DYNAMIC_LIMIT = 48 * 1024  # what a block may use without opting in
EXACT = Tolerance(rtol=0.0, atol=0.0)  # a permutation of the input: bit-exact

# "size": "max" (the device's opt-in limit, rounded down to 16 bytes) or a byte count.
# n = chunks * chunk + extra, where chunk = size / 4 floats: the sizes follow the device.
CASES = (
    # The whole opt-in limit (232448 B, 58112 floats per block on the H200); 600 full chunks,
    # 133 MiB each way on the H200.
    Case("max_optin", {"size": "max", "chunks": 600, "extra": 0}, tolerance=EXACT),
    # 16 bytes past the 48 KB default: the smallest size that needs the opt-in. 3000 full chunks
    # of 12292 floats plus a ragged chunk of 9001 (odd: the kernel's element-wise path).
    Case(
        "just_above_48k",
        {"size": DEFAULT_DYNAMIC_LIMIT + 16, "chunks": 3000, "extra": 9001},
        tolerance=EXACT,
    ),
    # Two full maximum chunks and a short third (4100 floats, a multiple of 4: the float4 path
    # with count < chunk).
    Case("max_optin_tail", {"size": "max", "chunks": 2, "extra": 4100}, tolerance=EXACT),
)


def _smem_bytes(case: Case, device: DeviceLimits) -> int:
    size = case.params["size"]
    smem = device.smem_optin_bytes // 16 * 16 if size == "max" else int(size)
    if smem % 16 != 0:
        raise ValueError(f"size={smem}: must be a multiple of 16 (float4 staging)")
    if smem <= DEFAULT_DYNAMIC_LIMIT:
        raise DeviceUnsupported(
            f"this device's opt-in limit ({device.smem_optin_bytes} B) is not above 48 KB"
        )
    if smem > device.smem_optin_bytes:
        raise DeviceUnsupported(
            f"{smem} B of dynamic shared memory exceeds this device's opt-in limit "
            f"({device.smem_optin_bytes} B)"
        )
    return smem


def _sizes(case: Case, smem_bytes: int) -> tuple[int, int]:
    chunk = smem_bytes // 4
    n = int32_extent("n", int(case.params["chunks"]) * chunk + int(case.params["extra"]))
    return chunk, n


def setup(case: Case, rng: np.random.Generator, device: DeviceLimits) -> Problem:
    smem = _smem_bytes(case, device)
    chunk, n = _sizes(case, smem)
    x = rng.standard_normal(n, dtype=np.float32)
    launch = Launch(
        entry="dynamic_smem_reverse",
        grid=grid_1d(n, chunk),
        block=(THREADS, 1, 1),
        args=(Buf("x"), Buf("y"), Scalar(np.int32(n)), Scalar(np.int32(smem))),
        shmem_bytes=smem,  # the launch sizes the extern __shared__ buffer; > 48 KB opts in
    )
    # The chunk length follows the device: reference() and work() read it from case.params.
    return Problem(
        inputs={"x": x},
        outputs={"y": np.empty(n, dtype=np.float32)},
        launches=(launch,),
        derived_params={"chunk": chunk, "n": n},
    )


def reference(case: Case, inputs: Mapping[str, np.ndarray]) -> Mapping[str, np.ndarray]:
    x = inputs["x"]
    chunk = int(case.params["chunk"])
    y = np.empty_like(x)
    for begin in range(0, x.size, chunk):
        y[begin : begin + chunk] = x[begin : begin + chunk][::-1]
    return {"y": y}


def work(case: Case) -> Work:
    return Work(bytes=2 * int(case.params["n"]) * 4)


SPEC = KernelSpec(
    cases=CASES,
    setup=setup,
    reference=reference,
    work=work,
    requires=None,
)
