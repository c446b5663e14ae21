"""Warp vote: per 32-lane group `__all_sync`, `__any_sync`, `__ballot_sync`, `__popc` of x > t.

Teaches the warp vote instructions: one predicate per lane, p_l = x[32g + l] > threshold
(float32, strict, threshold = 0.25), combined in one instruction into the answers for group g
(elements [32g, 32g + 32), one warp-wide vote):

- all[g]    (int32 0/1): p holds on every lane of the group,
- any[g]    (int32 0/1): p holds on at least one lane,
- ballot[g] (uint32):    bit l = p_l,
- popc[g]   (int32):     number of set bits of ballot[g].

Partial last group (n % 32 != 0): the lanes past n are excluded through the mask, not counted
as false. So all[g] is over the real elements only, and ballot bits of missing lanes are 0.

Why one warp votes for GROUPS = 8 consecutive groups rather than one: with one 4-byte load per
thread an SM has only 8 KB of loads in flight, too few to cover DRAM latency (Little's law wants
~30 KB at 4.3 TB/s), and the kernel ran at ~25% of the roofline. Each warp therefore issues its 8
coalesced loads first (64 KB in flight per full SM), then votes group by group; lane k keeps
group k's answers and lanes 0..7 store them at once. The outputs and their meaning are unchanged.

The inputs are built group by group so that every kind of vote shows up: all-true, all-false,
mixed at random, exactly one lane true, exactly one lane false (a value equal to the threshold,
which the strict `>` rejects), plus values equal to the threshold sprinkled among the false
ones. Groups 0, 1, 2 are all-true, all-false and mixed; in the cases marked so, the last
(partial) group is all-true, where "excluded" and "counted as false" give different answers.
Every output is compared exactly. Not about bandwidth (the input is read once, 16 bytes per group
written); the typical case reads 128 MiB so the timing means something.
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
    Work,
    ceil_div,
    grid_1d,
    int32_param,
)

THREADS = 256  # kThreads in the .cu; a multiple of 32
GROUPS = 8  # kGroups in the .cu: 32-element groups per warp
ELEMS_PER_BLOCK = THREADS * GROUPS
THRESHOLD = np.float32(0.25)

ALL_TRUE, ALL_FALSE, MIXED, ONE_TRUE, ONE_FALSE = range(5)

CASES = (
    # 1M groups, 128 MiB read.
    Case("n33554432", {"n": 1 << 25, "last_all_true": False}),
    # 1000003 = 32 * 31250 + 3: a last group of 3 lanes, all true (a warp's third group).
    Case("n1000003", {"n": 1_000_003, "last_all_true": True}),
    # A last group of 31 lanes with whatever pattern the draw gives it.
    Case("n1000031", {"n": 1_000_031, "last_all_true": False}),
    # Four groups: all-true, all-false, mixed, and a 4-lane all-true group.
    Case("n100", {"n": 100, "last_all_true": True}),
    # 227 = 32 * 7 + 3: the 3-lane last group is the warp's eighth, so lane 7, which stores its
    # answers, is outside the group's vote mask and must get them from lane 0.
    Case("n227", {"n": 227, "last_all_true": True}),
    # One element, true: all = any = 1, ballot = 1, popc = 1.
    Case("n1", {"n": 1, "last_all_true": True}),
)


def _intended_votes(case: Case, rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The intended vote of every element (bool [n]), warp kinds drawn at random, and the indices
    of the elements to set exactly to the threshold (the single "no" of each ONE_FALSE warp)."""
    warps = ceil_div(n, 32)
    kinds = rng.integers(0, 5, warps)
    kinds[:3] = (ALL_TRUE, ALL_FALSE, MIXED)[: min(3, warps)]
    lane = rng.integers(0, 32, warps, dtype=np.uint32)
    one_hot = np.left_shift(np.uint32(1), lane)
    words = rng.integers(0, 2**32, warps, dtype=np.uint32)  # MIXED: a fair coin per lane
    words[kinds == ALL_TRUE] = 0xFFFFFFFF
    words[kinds == ALL_FALSE] = 0
    words[kinds == ONE_TRUE] = one_hot[kinds == ONE_TRUE]
    words[kinds == ONE_FALSE] = ~one_hot[kinds == ONE_FALSE]
    one_false = kinds == ONE_FALSE
    if case.params["last_all_true"]:
        words[-1] = 0xFFFFFFFF
        one_false[-1] = False
    at_threshold = np.flatnonzero(one_false) * 32 + lane[one_false]
    lanes = np.arange(32, dtype=np.uint32)
    votes = ((words[:, None] >> lanes[None, :]) & 1).astype(bool).reshape(-1)[:n]
    return votes, at_threshold[at_threshold < n]


def setup(case: Case, rng: np.random.Generator, device: DeviceLimits) -> Problem:
    n = int32_param(case, "n")
    warps = ceil_div(n, 32)
    votes, at_threshold = _intended_votes(case, rng, n)
    u = rng.random(n, dtype=np.float32)  # [0, 1)
    above = THRESHOLD + np.float32(0.01) + np.float32(2.0) * u  # strictly > threshold
    below = THRESHOLD - np.float32(2.0) * u  # <= threshold
    below[rng.random(n, dtype=np.float32) < 0.05] = THRESHOLD  # equal: false under `>`
    below[at_threshold] = THRESHOLD
    x = np.where(votes, above, below).astype(np.float32)
    launch = Launch(
        entry="warp_vote",
        grid=grid_1d(n, ELEMS_PER_BLOCK),
        block=(THREADS, 1, 1),
        args=(
            Buf("x"),
            Scalar(THRESHOLD),
            Buf("all"),
            Buf("any"),
            Buf("ballot"),
            Buf("popc"),
            Scalar(np.int32(n)),
        ),
    )
    return Problem(
        inputs={"x": x},
        outputs={
            "all": np.empty(warps, dtype=np.int32),
            "any": np.empty(warps, dtype=np.int32),
            "ballot": np.empty(warps, dtype=np.uint32),
            "popc": np.empty(warps, dtype=np.int32),
        },
        launches=(launch,),
    )


def reference(case: Case, inputs: Mapping[str, np.ndarray]) -> Mapping[str, np.ndarray]:
    x = inputs["x"]
    n = x.size
    warps = ceil_div(n, 32)
    votes = np.zeros(warps * 32, dtype=bool)
    votes[:n] = x > THRESHOLD  # lanes past n are not in the mask: their bit is 0
    votes = votes.reshape(warps, 32)
    # Bit l of the ballot = lane l's vote: pack lanes 0..31 little-endian into one uint32.
    ballot = np.packbits(votes, axis=1, bitorder="little").view("<u4").reshape(warps)
    ballot = ballot.astype(np.uint32)
    popc = votes.sum(axis=1)
    active = np.minimum(32, n - 32 * np.arange(warps))  # lanes that vote in each warp
    return {
        "all": (popc == active).astype(np.int32),
        "any": (popc > 0).astype(np.int32),
        "ballot": ballot,
        "popc": popc.astype(np.int32),
    }


def work(case: Case) -> Work:
    n = int32_param(case, "n")
    return Work(bytes=n * 4 + ceil_div(n, 32) * 16)


SPEC = KernelSpec(
    cases=CASES,
    setup=setup,
    reference=reference,
    work=work,
    requires=None,
)
