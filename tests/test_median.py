"""The median's distribution-free interval, which verdicts judge by and the timer stops on."""

import numpy as np

from harness.model.median import (
    EXACT_BELOW,
    median_interval,
    sorted_median,
    sorted_median_interval,
)


def test_the_median_interval_is_the_exact_binomial_one():
    ordered = np.arange(100.0, 110.0)  # 10 samples: x(2)..x(9), 97.9 % coverage
    assert median_interval(np.random.default_rng(1).permutation(ordered)) == (101.0, 108.0)
    assert median_interval(np.arange(50.0)) == (17.0, 32.0)  # the tables' ranks 18 and 33
    assert median_interval(np.array([5.0, 1.0, 3.0])) == (1.0, 5.0)  # too few: the range


def test_sorted_samples_give_the_same_median_and_interval_without_a_sort():
    samples = np.random.default_rng(3).lognormal(size=101)
    for n in (1, 2, 7, 100, 101):
        ordered = sorted(samples[:n])
        assert sorted_median_interval(ordered) == median_interval(samples[:n])
        assert sorted_median(ordered) == float(np.median(samples[:n]))


def _exact_cut(n: int) -> int:
    """The order statistics left out at each end, from the binomial CDF in exact integers."""
    tail, term, below = 0, 1, 0  # 2**n times P(count <= below - 1); comb(n, below)
    while below < n // 2 and 40 * (tail + term) <= 2**n:  # CDF <= 0.025
        tail += term
        term = term * (n - below) // (below + 1)
        below += 1
    return max(below - 1, 0)


def test_the_interval_leaves_out_the_exact_binomial_ranks_at_every_count():
    for n in [*range(1, 700), 1023, 1024, 1025, EXACT_BELOW - 1]:
        ordered = list(range(n))
        assert sorted_median_interval(ordered) == (_exact_cut(n), n - 1 - _exact_cut(n)), n


def test_past_the_exact_table_the_cut_is_within_a_rank_of_the_exact_one():
    for n in (EXACT_BELOW, 5000, 20011):
        low, high = sorted_median_interval(list(range(n)))
        assert abs(low - _exact_cut(n)) <= 1 and high == n - 1 - low, n
