"""Which GPU runs which case: shards balanced by expected time, longest first.

A case is expected to take what it took in the last report of its target; a case that report
lacks is estimated from its size (the bytes and flops of its spec's work()). Shards are made the
way LPT scheduling makes them: longest case first, each to the shard with the least expected time
so far. Within a shard the order stays longest first, so a long case never ends a run alone.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

from harness.spec import Work

Item = TypeVar("Item")

# Cases whose host work runs ahead of the GPU, each on a thread of its own: setup (seeded random
# inputs) is one core's work per case, and a 512 MiB case takes about a second of it, longer than
# the GPU needs for it. Each waiting case holds its inputs and reference in host memory.
AHEAD_CASES = 3

# Host work per case, by the size of what it moves and computes (measured order of magnitude on
# the H200: a 512 MiB case takes ~1 s of setup, reference and checks; 1 TFLOP of numpy, ~10 s).
FIXED_S = 0.05
SECONDS_PER_BYTE = 2e-9
SECONDS_PER_FLOP = 1e-11


def estimate_seconds(work: Work | None) -> float:
    """A case's expected seconds from its size alone; the fixed cost when the size is unknown."""
    if work is None:
        return FIXED_S
    return FIXED_S + work.bytes * SECONDS_PER_BYTE + work.flops * SECONDS_PER_FLOP


def expected_seconds(
    key: tuple[str, str], last_seconds: Mapping[tuple[str, str], float], work: Work | None
) -> float:
    """The seconds the last report gave the case `key` (classname, case), else its estimate."""
    seen = last_seconds.get(key)
    return seen if seen is not None and seen > 0 else estimate_seconds(work)


def shard(items: Sequence[Item], weight: Callable[[Item], float], count: int) -> list[list[Item]]:
    """`items` in `count` shards of near-equal total weight, each in longest-first order."""
    shards: list[list[Item]] = [[] for _ in range(max(count, 1))]
    loads = [0.0] * len(shards)
    for item in sorted(items, key=weight, reverse=True):
        lightest = loads.index(min(loads))
        shards[lightest].append(item)
        loads[lightest] += weight(item)
    return shards
