"""A run's median and the distribution-free interval around it: what a verdict sets against its
baseline's (harness.report.verdict), and what tells the timer that it knows the median well
enough to stop sampling (harness.run.timer)."""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Sequence

import numpy as np

CONFIDENCE = 0.95
# Sample counts below this get the exact cut from a table of binomial CDFs (4096 rows: ~0.1 s
# once); the table's cost grows with the square of its size.
EXACT_BELOW = 4096


def median_interval(samples: Sequence[float]) -> tuple[float, float]:
    """A distribution-free interval for a run's median, by the order statistics whose ranks the
    binomial(n, 1/2) count of samples below the median reaches with CONFIDENCE. It assumes
    nothing of the timing's distribution (skewed, with outliers); with 5 samples or fewer no
    such ranks exist and it is the samples' whole range."""
    return sorted_median_interval(sorted(samples))


def sorted_median_interval(ordered: Sequence[float]) -> tuple[float, float]:
    """median_interval of samples already in ascending order (no sort: the timer asks after
    every sample)."""
    cut = _order_cut(len(ordered))
    return float(ordered[cut]), float(ordered[len(ordered) - 1 - cut])


def sorted_median(ordered: Sequence[float]) -> float:
    """The median of samples already in ascending order."""
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return float(ordered[middle])
    return (float(ordered[middle - 1]) + float(ordered[middle])) / 2.0


def median_known(ordered: Sequence[float], within_pct: float, resolution: float = 0.0) -> bool:
    """Whether both ends of the median's interval lie within `within_pct` of the median, or
    within `resolution` of it where that is more (the timer's step: no count of samples tells
    a median apart more finely than the values they can take), for samples already in
    ascending order."""
    low, high = sorted_median_interval(ordered)
    median = sorted_median(ordered)
    allowed = max(within_pct / 100.0 * abs(median), resolution)
    return max(high - median, median - low) <= allowed


def _order_cut(n: int) -> int:
    """How many order statistics median_interval leaves out at each end of n samples: one less
    than the count of ranks k below n // 2 whose binomial(n, 1/2) CDF is at most half of
    1 - CONFIDENCE (none: 0). Exact below EXACT_BELOW samples; from there on, the binomial's
    normal approximation (with continuity correction), within a rank of the exact cut."""
    if n < EXACT_BELOW:
        return _order_cuts(1 << max(n, 1).bit_length())[n]  # tables by powers of two: few
    z = statistics.NormalDist().inv_cdf(1.0 - (1.0 - CONFIDENCE) / 2.0)
    return math.floor(n / 2.0 - 0.5 - z * math.sqrt(n) / 2.0)


@functools.lru_cache(maxsize=8)
def _order_cuts(size: int) -> tuple[int, ...]:
    """_order_cut of every n below `size`, from the binomial(n, 1/2) CDFs row by row
    (F(n + 1, k) = (F(n, k) + F(n, k - 1)) / 2), a few ms for a thousand n. The timer asks
    after every sample, each time of one more: the CDF summed afresh for each n (exact
    integers) cost it hundreds of microseconds a sample."""
    cdf = np.ones(size)  # F(0, k) for k = 0..size-1
    cuts = [0]
    for n in range(1, size):
        cdf[1:] = (cdf[1:] + cdf[:-1]) / 2.0
        cdf[0] /= 2.0
        half = n // 2
        below = int(np.searchsorted(cdf[:half], (1.0 - CONFIDENCE) / 2.0, side="right"))
        cuts.append(max(below - 1, 0))
    return tuple(cuts)
