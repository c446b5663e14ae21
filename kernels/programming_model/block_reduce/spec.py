"""Block reduce: one partial sum per block through a shared-memory tree; block size 128/256/512.

Teaches the block as the unit of cooperation: threads of one block share memory and meet at
`__syncthreads()`. Each thread first streams its share of the block's slice into a private
float4 (16-byte loads, four in flight per thread), then the block folds its BLOCK values in a
shared-memory tree that halves the live range per step with a barrier between steps, and the
last 64 values are finished by warp 0 with shuffles. The block size is a template parameter;
the three instantiations are separate entries (`block_reduce_block128/256/512`) and separate
cases, so the matrix compares them on the same 64M-float input.

What it computes: with `chunk` elements per block (a multiple of 4), block b writes
partials[b] = sum(x[b*chunk : min((b+1)*chunk, n)]) as float32, for b < ceil(n / chunk).
Checked against numpy float64 per-block sums.

Memory bound: the input is read once, the partials (one float per 64 KiB) written once.
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
    ceil_div,
    int32_param,
)

from ..span_sums import span_sums

FLOAT32_EPS = float(np.finfo(np.float32).eps)
CHUNK = 16384  # elements per block in every case: 64 KiB of input, 4096 blocks at n = 64M


def _tolerance(chunk: int, block: int) -> Tolerance:
    # Inputs are uniform in [0, 1): all terms are non-negative, so no cancellation, and a
    # float32 sum's relative error is bounded by (adds on the longest dependent chain) * eps.
    # The chain: one thread's float4 lane (chunk / (4 * block) adds), 2 lane-combining adds,
    # the scalar tail (<= 1), log2(block) - 6 tree steps, 1 add of the pair, 5 shuffle levels.
    # At chunk = 16384 and block = 128 that is 32 + 2 + 1 + 1 + 1 + 5 = 42 adds, about 5e-6:
    # docs/CONTRACT.md's 1e-4 holds with a 20x margin; it would only grow for much longer chunks.
    chain = chunk // (4 * block) + 2 + 1 + max(0, block.bit_length() - 1 - 6) + 1 + 5
    return Tolerance(rtol=max(1e-4, 2.0 * chain * FLOAT32_EPS), atol=1e-4)


def _case(n: int, block: int, chunk: int = CHUNK) -> Case:
    return Case(
        f"n{n}_block{block}",
        {"n": n, "block": block, "chunk": chunk},
        tolerance=_tolerance(chunk, block),
    )


CASES = (
    # 256 MiB read (4x+ the H200's 60 MB L2), the same input for each block size.
    _case(1 << 26, 128),
    _case(1 << 26, 256),
    _case(1 << 26, 512),
    # n is not a multiple of the chunk, nor of 4: the last block (of 62) gets 579 elements,
    # 144 float4s spread over the first threads plus a 3-element scalar tail.
    _case(1_000_003, 256),
    # Smaller than one block's threads: one block, 25 float4s, threads 25.. contribute zero.
    _case(100, 128),
    # Smaller than one float4: only the scalar tail runs, in threads 0..4 of one block.
    _case(5, 512),
)


def _dims(case: Case) -> tuple[int, int, int, int]:
    block, chunk = int(case.params["block"]), int(case.params["chunk"])
    if block not in (128, 256, 512):
        raise ValueError(f"block={block}: the .cu instantiates 128, 256 and 512 only")
    if chunk <= 0 or chunk % 4 != 0:
        raise ValueError(f"chunk={chunk}: must be a positive multiple of 4 (float4 loads)")
    n = int32_param(case, "n")
    return n, block, chunk, ceil_div(n, chunk)


def setup(case: Case, rng: np.random.Generator, device: DeviceLimits) -> Problem:
    n, block, chunk, blocks = _dims(case)
    x = rng.random(n, dtype=np.float32)  # uniform [0, 1): see _tolerance
    launch = Launch(
        entry=f"block_reduce_block{block}",
        grid=(blocks, 1, 1),
        block=(block, 1, 1),
        args=(Buf("x"), Buf("partials"), Scalar(np.int32(n)), Scalar(np.int32(chunk))),
    )
    return Problem(
        inputs={"x": x},
        outputs={"partials": np.empty(blocks, dtype=np.float32)},
        launches=(launch,),
    )


def reference(case: Case, inputs: Mapping[str, np.ndarray]) -> Mapping[str, np.ndarray]:
    _, _, chunk, _ = _dims(case)
    return {"partials": span_sums(inputs["x"], chunk).astype(np.float32)}


def work(case: Case) -> Work:
    n, _, _, blocks = _dims(case)
    return Work(bytes=n * 4 + blocks * 4)


SPEC = KernelSpec(
    cases=CASES,
    setup=setup,
    reference=reference,
    work=work,
    requires=None,
)
