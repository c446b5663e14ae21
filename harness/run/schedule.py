"""Which GPU runs which case, and in which order: shards balanced by expected time, each worked
through in the order that keeps its GPU busiest.

A case has two parts. Its host work (the spec's setup and reference, for the inputs it is
verified on and for the fresh inputs it is checked on after timing) runs on host threads ahead
of its turn. Its turn on the GPU worker (upload, the checked launch, timing, downloads and
comparisons) runs one case at a time. Each part is expected to take what it took in the last
report of its target; a case that report lacks is estimated from its size (the bytes and flops
of its spec's work()).

Shards are made the way LPT scheduling makes them: longest turn first, each to the shard with
the least expected time so far. Each shard is then ordered as a two-stage flow shop (Johnson's
rule): the cases whose turn outlasts their host work first, least host work first, so the GPU
starts at once while the host prepares what comes; then the rest, longest turn first, so the
last turns are short and no case's host work is left waiting at the end. A kernel's cases run
in a worker of its own, one after another: the rule orders a shard's kernels (by their sums),
then each kernel's cases.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from harness.model.spec import Work

Item = TypeVar("Item")

# The cases whose host work may run ahead of the GPU, on host threads of their own: setup
# (seeded random inputs) is one core's work per case, and a 512 MiB case takes about a second of
# it, longer than the GPU needs for it, while a small case's turn is about 0.1 s. Looking 24 cases
# ahead hides a run of large cases' host work behind the small cases before them: on an H200,
# test-sm90 waited 0.7 s in all on host work that way, 8 ahead, and not at all 24 ahead, 2 s
# sooner. Each waiting case holds its inputs and reference in host memory, so how many wait is
# bounded by the memory set aside for them too (ahead_memory).
AHEAD_CASES = 24
# The host memory that cases prepared ahead may hold: this share of what is free when the
# worker starts, at most AHEAD_MEMORY_MAX.
AHEAD_MEMORY_SHARE = 0.25
AHEAD_MEMORY_MAX = 16 << 30
# What a case whose spec cannot say its size (work() raised) is taken to hold.
AHEAD_UNKNOWN_BYTES = 256 << 20

# Host work per case, by the size of what it moves and computes (measured order of magnitude on
# the H200: a 512 MiB case takes ~1 s of setup, reference and checks; 1 TFLOP of numpy, ~10 s).
FIXED_S = 0.05
SECONDS_PER_BYTE = 2e-9
SECONDS_PER_FLOP = 1e-11
# A turn on the GPU worker, by size: a timing of up to max_samples short samples (~0.1 s on the
# H200), and the downloads and comparisons of what the case moves.
TURN_FIXED_S = 0.1
TURN_SECONDS_PER_BYTE = 1e-9


@dataclass(frozen=True)
class ExpectedTime:
    """What a case is expected to take: `host_s` of host work ahead of its turn, `turn_s` on
    the GPU worker."""

    host_s: float
    turn_s: float


def estimate(work: Work | None) -> ExpectedTime:
    """A case's expected seconds from its size alone; the fixed costs when the size is unknown."""
    if work is None:
        return ExpectedTime(FIXED_S, TURN_FIXED_S)
    host = FIXED_S + work.bytes * SECONDS_PER_BYTE + work.flops * SECONDS_PER_FLOP
    return ExpectedTime(host, TURN_FIXED_S + work.bytes * TURN_SECONDS_PER_BYTE)


def ahead_memory() -> int:
    """The bytes of host memory that cases prepared ahead may hold on this machine."""
    try:
        free = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):  # not a POSIX system that says
        return AHEAD_MEMORY_MAX // 4
    return min(int(free * AHEAD_MEMORY_SHARE), AHEAD_MEMORY_MAX)


def within_memory(sizes: Sequence[int], limit: int) -> int:
    """How many of the cases ahead, in order, to prepare: those whose bytes (`sizes`) fit within
    `limit` together, and always the first (the next case needs its inputs anyway)."""
    held = 0
    for count, size in enumerate(sizes):
        held += size
        if count and held > limit:
            return count
    return len(sizes)


def expected_time(
    key: tuple[str, str], last: Mapping[tuple[str, str], ExpectedTime], work: Work | None
) -> ExpectedTime:
    """What the last report gave the case `key` (classname, case), else its estimate."""
    seen = last.get(key)
    return seen if seen is not None and seen.turn_s > 0 else estimate(work)


def balanced_parts(
    items: Sequence[Item], weight: Callable[[Item], float], count: int
) -> list[list[Item]]:
    """`items` in `count` parts of near-equal total weight, each in longest-first order: the
    shards of `test --shard`, or one run's cases over its GPUs."""
    parts: list[list[Item]] = [[] for _ in range(max(count, 1))]
    loads = [0.0] * len(parts)
    for item in sorted(items, key=weight, reverse=True):
        lightest = loads.index(min(loads))
        parts[lightest].append(item)
        loads[lightest] += weight(item)
    return parts


def pipeline_order(items: Sequence[Item], expect: Callable[[Item], ExpectedTime]) -> list[Item]:
    """`items` in Johnson's order for host work then a turn: those whose turn is the longer by
    least host work, then the others by longest turn."""
    turn_bound = [item for item in items if expect(item).host_s < expect(item).turn_s]
    host_bound = [item for item in items if expect(item).host_s >= expect(item).turn_s]
    return sorted(turn_bound, key=lambda item: expect(item).host_s) + sorted(
        host_bound, key=lambda item: expect(item).turn_s, reverse=True
    )


def grouped_pipeline_order(
    items: Sequence[Item], group_of: Callable[[Item], str], expect: Callable[[Item], ExpectedTime]
) -> list[list[Item]]:
    """`items` in groups that run one after another (a kernel's cases, in a worker of its own):
    each group in pipeline_order, the groups in Johnson's order of their sums."""
    groups: dict[str, list[Item]] = {}
    for item in items:
        groups.setdefault(group_of(item), []).append(item)

    def total(group: list[Item]) -> ExpectedTime:
        return ExpectedTime(
            sum(expect(i).host_s for i in group), sum(expect(i).turn_s for i in group)
        )

    ordered = pipeline_order(list(groups.values()), total)
    return [pipeline_order(group, expect) for group in ordered]
