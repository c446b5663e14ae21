"""The verdict of a cell against its baseline: the median's interval, the threshold by time
scale, and the four judgements."""

from __future__ import annotations

import numpy as np
import pytest

from harness.model.result import Cell, CellKind, Outcome, Provenance, Timing
from harness.report.verdict import Judgement, judge, median_interval, threshold_pct

WHERE = Provenance(runner="h200")


def _timed(samples) -> Cell:
    samples = tuple(float(v) for v in samples)
    timing = Timing(float(np.median(samples)), min(samples), max(samples), 0.0, samples)
    return Cell(CellKind.CASE, "ch", "k", "n", "sm_90a", WHERE, Outcome.PASSED, timing=timing)


def test_the_median_interval_is_the_exact_binomial_one():
    ordered = np.arange(100.0, 110.0)  # 10 samples: x(2)..x(9), 97.9 % coverage
    assert median_interval(np.random.default_rng(1).permutation(ordered)) == (101.0, 108.0)
    assert median_interval(np.arange(50.0)) == (17.0, 32.0)  # the tables' ranks 18 and 33
    assert median_interval(np.array([5.0, 1.0, 3.0])) == (1.0, 5.0)  # too few: the range


def test_the_threshold_follows_the_time_scale():
    assert threshold_pct(3.0) == 15.0  # launch-bound: 13.5 % seen across machines
    assert threshold_pct(19.9) == 15.0
    assert threshold_pct(20.0) == 3.5 and threshold_pct(3000.0) == 3.5


@pytest.mark.parametrize(
    ("shift", "spread", "judgement"),
    [
        (1.05, 0.002, Judgement.SLOWER),  # 5 % slower, 0.2 % noise: clear
        (0.95, 0.002, Judgement.FASTER),
        (1.01, 0.002, Judgement.SAME),  # within the 3.5 % a rerun can move
        (1.05, 0.05, Judgement.AMBIGUOUS),  # 5 % slower but 5 % noise: cannot tell
    ],
)
def test_the_judgement_needs_the_whole_interval_past_the_threshold(shift, spread, judgement):
    rng = np.random.default_rng(7)
    base = 100.0 * (1 + spread * rng.standard_normal(40))
    now = 100.0 * shift * (1 + spread * rng.standard_normal(40))
    verdict = judge(_timed(now), _timed(base), same=False)
    assert verdict.judgement is judgement, verdict
    assert verdict.low <= verdict.ratio <= verdict.high


def test_a_slower_cell_of_the_same_code_is_the_environment():
    base = _timed([100.0, 100.1, 99.9, 100.0, 100.05, 99.95, 100.0, 100.1, 99.9, 100.0])
    now = _timed([v * 1.10 for v in base.timing.samples_us])
    verdict = judge(now, base, same=True)
    assert verdict.judgement is Judgement.SLOWER
