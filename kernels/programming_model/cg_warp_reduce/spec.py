"""CG warp reduce: per-group sums with `cg::tiled_partition<32>` and `cg::reduce` (exercise 2).

Teaches the cooperative-groups form of a warp reduction: the block from
`cg::this_thread_block()`, cut into 32-thread tiles by `cg::tiled_partition<32>`, each tile
summing one float per thread with `cg::reduce(tile, v, cg::plus<float>())`. The tile object
carries the member mask that the raw `__shfl_xor_sync` version spells out by hand.

Output: sums[g] = sum(x[32g : min(32g + 32, n)]) (float32), one per 32-element group, i.e. one
warp-wide reduce's worth; the tile index comes from `meta_group_rank()` / `meta_group_size()`.
Partial last group: every lane of the tile calls the collective reduce, lanes past n
contribute 0.

Why a tile sums GROUPS = 8 consecutive groups rather than one: with one 4-byte load per thread an
SM has only 8 KB of loads in flight, too few to cover DRAM latency (Little's law wants ~30 KB at
4.3 TB/s), and the kernel ran at ~30% of the roofline. Each tile therefore issues its 8 coalesced
loads first (64 KB in flight per full SM), then runs one `cg::reduce` per group; lane k keeps
group k's sum and lanes 0..7 store the 8 sums at once. The sums and their meaning are unchanged.
Bandwidth is reported (x read once, one float per 32 written), but the point is the CG API.
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
)

THREADS = 256  # kThreads in the .cu; a multiple of 32
GROUPS = 8  # kGroups in the .cu: 32-element groups per tile
ELEMS_PER_BLOCK = THREADS * GROUPS
# Inputs are uniform in [-1, 1), so a warp's sum of |x| is at most 32. cg::reduce adds in a
# tree of five levels, each rounding once: the float32 sum is within 5 * 2^-24 * 32 < 1e-5 of
# the exact one, so CONTRACT's atol of 1e-4 covers it, sums that cancel to near zero included.
TOLERANCE = Tolerance(rtol=1e-4, atol=1e-4)

CASES = (
    # 128 MiB read, 1M group sums written.
    Case("n33554432", {"n": 1 << 25}, tolerance=TOLERANCE),
    # 1000003 = 32 * 31250 + 3: a last group of 3 lanes (group 31250 = tile 3906's third), in a
    # block (2048 elements = 64 groups) whose later groups and tiles are empty.
    Case("n1000003", {"n": 1_000_003}, tolerance=TOLERANCE),
    # One full group and a second group with a single lane, in one tile.
    Case("n33", {"n": 33}, tolerance=TOLERANCE),
    # A single element: one tile, one real lane, seven empty groups, seven empty tiles.
    Case("n1", {"n": 1}, tolerance=TOLERANCE),
)


def _n(case: Case) -> int:
    n = int(case.params["n"])
    if not 0 < n < 2**31:
        raise ValueError(f"n={n}: the kernel takes n as a 32-bit int")
    return n


def setup(case: Case, rng: np.random.Generator, device: DeviceLimits) -> Problem:
    n = _n(case)
    x = rng.uniform(-1.0, 1.0, n).astype(np.float32)  # both signs: sums may cancel
    launch = Launch(
        entry="cg_warp_reduce",
        grid=(-(-n // ELEMS_PER_BLOCK), 1, 1),
        block=(THREADS, 1, 1),
        args=(Buf("x"), Buf("sums"), Scalar(np.int32(n))),
    )
    return Problem(
        inputs={"x": x},
        outputs={"sums": np.empty(-(-n // 32), dtype=np.float32)},
        launches=(launch,),
    )


def reference(case: Case, inputs: Mapping[str, np.ndarray]) -> Mapping[str, np.ndarray]:
    x = inputs["x"].astype(np.float64)
    n = x.size
    warps = -(-n // 32)
    padded = np.zeros(warps * 32)
    padded[:n] = x
    return {"sums": padded.reshape(warps, 32).sum(axis=1).astype(np.float32)}


def work(case: Case) -> Work:
    n = _n(case)
    return Work(bytes=n * 4 + -(-n // 32) * 4)


SPEC = KernelSpec(
    source="cg_warp_reduce.cu",
    cases=CASES,
    setup=setup,
    reference=reference,
    work=work,
    requires=None,
)
