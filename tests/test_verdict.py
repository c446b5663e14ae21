"""The verdict of a cell against its baseline: the median's interval, the threshold by time
scale and its absolute floor, calibrated on the kept reports of four H200s, the judgements, GPU
shared, and when a cross-run SLOWER stands unconfirmed."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest

from harness.model.cell import ABComparison, Cell, Judgement, Provenance, Timing
from harness.model.outcome import CellKind, Outcome
from harness.report.verdict import (
    BaseTiming,
    judge,
    threshold_pct,
    unconfirmed,
)
from tests.h200_runs import kept_report, kept_runs

WHERE = Provenance(runner="h200")
# The runs of 13 H200 machines (9336b2d:docs/reports/h200/fleet, kept compact in
# tests/fixtures/h200): the same kernels, their code identities unchanged
FLEET = [run for run in kept_runs() if run.startswith("fleet/")]


def _timed(samples, shared_gpu: str | None = None) -> Cell:
    samples = tuple(float(v) for v in samples)
    timing = Timing(
        float(np.median(samples)), min(samples), max(samples), 0.0, samples, shared_gpu=shared_gpu
    )
    return Cell(CellKind.CASE, "ch", "k", "n", "sm_90a", WHERE, Outcome.PASSED, timing=timing)


def _around(median_us: float, spread: float = 0.002, seed: int = 7) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return median_us * (1 + spread * rng.standard_normal(40))


def test_the_threshold_is_relative_with_an_absolute_floor():
    assert threshold_pct(3000.0) == 6.0 and threshold_pct(25.0) == 6.0  # the relative one
    assert threshold_pct(20.0) == pytest.approx(7.5)  # 1.5 us of 20
    assert threshold_pct(5.0) == pytest.approx(30.0)  # launch-bound: the floor decides


@pytest.mark.parametrize(
    ("shift", "spread", "judgement"),
    [
        (1.10, 0.002, Judgement.SLOWER),  # 10 % slower, 0.2 % noise: clear
        (0.90, 0.002, Judgement.FASTER),
        (1.03, 0.002, Judgement.SAME),  # within the 6 % one H200 moves from another
        (1.08, 0.05, Judgement.AMBIGUOUS),  # 8 % slower but 5 % noise: cannot tell
    ],
)
def test_the_judgement_needs_the_whole_interval_past_the_threshold(shift, spread, judgement):
    base, now = _around(100.0, spread), _around(100.0 * shift, spread, seed=8)
    verdict = judge(_timed(now), BaseTiming.of(_timed(base).timing), same=False)
    assert verdict.judgement is judgement, verdict
    assert verdict.low <= verdict.ratio <= verdict.high


def test_a_launch_bound_case_moving_by_less_than_the_floor_is_not_slower():
    """5.25 -> 6.05 us (15 %): what an unchanged launch-bound case did between two machines."""
    verdict = judge(_timed(_around(6.05)), BaseTiming.of(_timed(_around(5.25)).timing), same=True)
    assert verdict.low > 1.14  # beyond any relative threshold on its own
    assert verdict.judgement is Judgement.SAME, verdict


def test_a_launch_bound_case_twice_as_slow_is_slower():
    verdict = judge(_timed(_around(10.0)), BaseTiming.of(_timed(_around(5.0)).timing), same=False)
    assert verdict.judgement is Judgement.SLOWER and verdict.ratio == pytest.approx(2.0, rel=0.01)


def test_a_slower_cell_of_the_same_code_is_the_environment():
    base = _timed([100.0, 100.1, 99.9, 100.0, 100.05, 99.95, 100.0, 100.1, 99.9, 100.0])
    now = _timed([v * 1.10 for v in base.timing.samples_us])
    verdict = judge(now, BaseTiming.of(base.timing), same=True)
    assert verdict.judgement is Judgement.SLOWER
    assert unconfirmed(verdict) is None  # the same code: nothing for an A/B to confirm


@pytest.mark.parametrize(
    ("now_shared", "base_shared", "said"),
    [
        ("pid 4242 (python) on GPU 0", None, "this run: pid 4242 (python) on GPU 0"),
        (None, "utilization 80 % before", "the baseline: utilization 80 % before"),
    ],
)
def test_a_cell_timed_on_a_shared_gpu_is_judged_gpu_shared_never_slower(
    now_shared, base_shared, said
):
    base = _timed(_around(100.0), shared_gpu=base_shared)
    now = _timed(_around(200.0), shared_gpu=now_shared)  # twice as slow: still not SLOWER
    verdict = judge(now, BaseTiming.of(base.timing), same=False)
    assert verdict.judgement is Judgement.GPU_SHARED and verdict.judgement.value == "GPU shared"
    assert verdict.shared_gpu == said
    assert unconfirmed(verdict) is None


def _slower_of_changed_code(ab: ABComparison | None):
    base = _timed(_around(100.0))
    now = dataclasses.replace(_timed(_around(120.0)), ab=ab)
    verdict = judge(now, BaseTiming.of(base.timing), same=False)
    assert verdict.judgement is Judgement.SLOWER
    return verdict


def test_a_cross_run_slower_of_changed_code_is_unconfirmed_until_an_a_b_measures_it():
    assert unconfirmed(_slower_of_changed_code(None)) == "no A/B was run for it"
    not_run = ABComparison("f00dfeed" * 5, Judgement.NOT_RUN, why="the base fails to build")
    assert unconfirmed(_slower_of_changed_code(not_run)) == (
        "its A/B against f00dfeedf0 is NOT_RUN: the base fails to build"
    )
    same = ABComparison("f00dfeed" * 5, Judgement.SAME, ratio=1.001, low=0.999, high=1.003)
    assert unconfirmed(_slower_of_changed_code(same)) is None  # measured: it refutes it


def _pairs():
    """(target, machine, machine) for every two machines that ran the target."""
    for target in ("sm_90a", "sm_80"):
        ran = [run.split("/")[1] for run in FLEET if run.endswith(f"/junit-{target}")]
        for one, other in itertools.combinations(ran, 2):
            yield pytest.param(target, one, other, id=f"{target}-{one}-{other}")


def test_every_pair_of_the_13_machines_is_judged():
    """13 machines ran sm_90a and 11 of them sm_80: 78 and 55 pairs, each judged both ways."""
    pairs = [param.values[0] for param in _pairs()]
    assert (pairs.count("sm_90a"), pairs.count("sm_80")) == (78, 55)


@pytest.mark.parametrize(("target", "one", "other"), list(_pairs()))
def test_no_two_h200s_judge_unchanged_code_slower_or_faster(target, one, other):
    """The calibration of RELATIVE_PCT and FLOOR_US: the same code on two machines, each way."""
    cells = [
        {(c.classname, c.name): c for c in kept_report(f"fleet/{m}/junit-{target}").cells}
        for m in (one, other)
    ]
    timed = [key for key in cells[0] if cells[0][key].timing and key in cells[1]]
    assert len(timed) >= 95  # every case of the target was timed on both
    moved = [
        (key, verdict.judgement, round(verdict.ratio, 3))
        for key in timed
        for now, base in ((cells[0], cells[1]), (cells[1], cells[0]))
        if (verdict := judge(now[key], BaseTiming.of(base[key].timing), same=True)).judgement
        in (Judgement.SLOWER, Judgement.FASTER)
    ]
    assert moved == []


def test_the_ab_thresholds_are_those_the_a_a_calibration_derived():
    """docs/reports/h200/aa: identical code's intervals stayed under 1.014 below 20 us, reached
    1.0051 once at 20-50 us, and stayed under 1.0008 from 50 us, where a planted 2 % slowdown's
    never fell under 1.0072."""
    from harness.report.verdict import ab_threshold_pct, judge_paired

    assert ab_threshold_pct(10.0) == 3.0 and ab_threshold_pct(42.7) == 1.0
    assert ab_threshold_pct(59.0) == 0.5 and ab_threshold_pct(3000.0) == 0.5
    assert ab_threshold_pct(2.0) == pytest.approx(5.0)  # the 0.1 us floor decides
    # the one false SLOWER of the calibration (42.7 us, interval 1.0051-1.0176) is not one now
    calibrated_outlier = [1.0051, 1.0157, 1.0176] * 10
    assert judge_paired(calibrated_outlier, ab_threshold_pct(42.7))[3].value != "SLOWER"
    assert judge_paired(calibrated_outlier, 0.5)[3].value == "SLOWER"
    planted_worst = [1.0072, 1.0194, 1.0230] * 10  # the 2 % slowdown's widest interval
    assert judge_paired(planted_worst, ab_threshold_pct(59.0))[3].value == "SLOWER"
