"""Whether a timed cell changed against a baseline run: SAME, FASTER, SLOWER or AMBIGUOUS.

The two runs' samples, not their summaries, decide: an interval of the ratio of their medians
(from each median's distribution-free interval) is set against the spread that reruns of an
unchanged binary show at that time scale.
SLOWER and FASTER need the whole interval beyond that threshold, SAME needs it within, and
anything between is AMBIGUOUS: too noisy to tell. A SLOWER cell whose code is the baseline's (the
same code identity: what the GPU executes, wherever it was built) is the environment's doing
(another machine, a throttling GPU), not the code's.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from harness.model.result import Cell, CompileFacts

# The change a rerun of the same binary can show, by how long the case runs. Measured on H200s
# (the reruns kept in docs/reports/h200): back to back on one machine the per-case medians moved
# by up to 1.0 % for cases of 20 us or more and 6.1 % below; across machines by up to 3.0 % and
# 13.5 % (launch-bound 3 us cases).
THRESHOLDS_PCT = ((20.0, 15.0), (float("inf"), 3.5))  # (cases below this many us, threshold)
CONFIDENCE = 0.95
# A/B on one GPU (harness ab): what the paired ratio of identical code shows, by time scale:
# (cases below this many us, threshold %), and an absolute floor a change must also exceed.
AB_THRESHOLDS_PCT = ((20.0, 3.0), (float("inf"), 0.5))
AB_FLOOR_US = 0.1


class Judgement(enum.Enum):
    SAME = "SAME"
    FASTER = "FASTER"
    SLOWER = "SLOWER"
    AMBIGUOUS = "AMBIGUOUS"


@dataclass(frozen=True)
class Verdict:
    cell: Cell
    baseline_us: float
    ratio: float  # current / baseline median: above 1 is slower
    low: float  # the ratio's confidence interval
    high: float
    threshold_pct: float
    judgement: Judgement
    same_code: bool | None  # the baseline's code (same_code); None: cannot tell

    @property
    def change_pct(self) -> float:
        return 100.0 * (self.ratio - 1.0)


def threshold_pct(median_us: float) -> float:
    for below_us, pct in THRESHOLDS_PCT:
        if median_us < below_us:
            return pct
    return THRESHOLDS_PCT[-1][1]


def median_interval(samples: np.ndarray) -> tuple[float, float]:
    """A distribution-free interval for a run's median, by the order statistics whose ranks the
    binomial(n, 1/2) count of samples below the median reaches with CONFIDENCE. It assumes
    nothing of the timing's distribution (skewed, with outliers); with 5 samples or fewer no
    such ranks exist and it is the samples' whole range."""
    ordered = np.sort(samples)
    n = ordered.size
    tail, below = 0.0, 0  # P(count <= below - 1), and how many order statistics it excludes
    while below < n // 2 and tail + math.comb(n, below) / 2**n <= (1.0 - CONFIDENCE) / 2.0:
        tail += math.comb(n, below) / 2**n
        below += 1
    cut = max(below - 1, 0)
    return float(ordered[cut]), float(ordered[n - 1 - cut])


def ratio_interval(current: np.ndarray, baseline: np.ndarray) -> tuple[float, float]:
    """An interval of median(current) / median(baseline) from the two medians' intervals."""
    now_low, now_high = median_interval(current)
    base_low, base_high = median_interval(baseline)
    return now_low / base_high, now_high / base_low


def same_code(now: CompileFacts | None, base: CompileFacts | None) -> bool | None:
    """Whether two builds make the GPU execute the same: by code identity, else (a build from
    before identities) by the binary's bytes; None when neither side can say."""
    if now is None or base is None:
        return None
    if now.code_identity and base.code_identity:
        return now.code_identity == base.code_identity
    if now.binary_sha256 and base.binary_sha256:
        return now.binary_sha256 == base.binary_sha256
    return None


def judge(cell: Cell, baseline: Cell, same: bool | None = None) -> Verdict:
    """`cell` against the same cell of the baseline run; both must be timed."""
    timed, base_timed = cell.timing, baseline.timing
    if timed is None or base_timed is None:
        raise ValueError(f"{cell.classname} {cell.name}: only two timed cells can be judged")
    now, base = np.asarray(timed.samples_us), np.asarray(base_timed.samples_us)
    ratio = timed.median_us / base_timed.median_us
    low, high = ratio_interval(now, base) if now.size and base.size else (ratio, ratio)
    threshold = threshold_pct(min(timed.median_us, base_timed.median_us))
    judgement = _classify(low, high, threshold)
    return Verdict(cell, base_timed.median_us, ratio, low, high, threshold, judgement, same)


def ab_threshold_pct(median_us: float) -> float:
    """What a paired A/B change must exceed at this time scale: the relative threshold, or the
    absolute floor where that is larger (a 3 us case moves by a whole 0.1 us step)."""
    relative = next(pct for below_us, pct in AB_THRESHOLDS_PCT if median_us < below_us)
    return max(relative, 100.0 * AB_FLOOR_US / median_us)


def judge_paired(
    ratios: Sequence[float], threshold: float
) -> tuple[float, float, float, Judgement]:
    """From the head/base ratio of each A/B round: the median ratio, its distribution-free
    interval, and the judgement against `threshold` (%), by the rule `judge` follows."""
    values = np.asarray(ratios, dtype=float)
    if values.size == 0:
        raise ValueError("no A/B rounds to judge")
    ratio = float(np.median(values))
    low, high = median_interval(values)
    return ratio, low, high, _classify(low, high, threshold)


def _classify(low: float, high: float, threshold: float) -> Judgement:
    band = threshold / 100.0
    if low > 1.0 + band:
        return Judgement.SLOWER
    if high < 1.0 - band:
        return Judgement.FASTER
    if low >= 1.0 - band and high <= 1.0 + band:
        return Judgement.SAME
    return Judgement.AMBIGUOUS
