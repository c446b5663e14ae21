"""The timing loop's stopping rule and statistics, with fake events (no GPU needed)."""

from __future__ import annotations

import collections
import dataclasses
import itertools
import math
import statistics

import numpy as np
import pytest

from harness.model.matrix import TimerSettings
from harness.model.median import median_known
from harness.run.timer import ClockProbe, RunningNoise, StopRule, measure, summarize


class FakeEvent:
    def __init__(self, ms=0.0):
        self.ms = ms

    def __sub__(self, other):
        return self.ms - other.ms

    def sync(self):
        pass


class FakeDevice:
    def create_event(self, options=None):
        return FakeEvent()


class FakeStream:
    """Each run takes the next duration from `durations_ms`; events are reused, as on a GPU.
    A sample records two: before the run and after it."""

    device = FakeDevice()

    def __init__(self, durations_ms):
        self.durations = iter(durations_ms)
        self.now = 0.0
        self.recorded = 0

    def record(self, event, options=None):
        if self.recorded % 2 == 1:
            self.now += next(self.durations)
        self.recorded += 1
        event.ms = self.now
        return event

    def sync(self):
        pass


class FakeBuffer:
    def __init__(self):
        self.fills = 0

    def fill(self, value, stream):
        self.fills += 1


class FakeGate:
    def __init__(self, log=None):
        self.log = log if log is not None else []

    def hold(self, stream):
        self.log.append("hold")

    def release(self):
        self.log.append("release")


DEFAULTS = TimerSettings(
    warmup_runs=2,
    min_samples=10,
    max_samples=50,
    noise_target_pct=0.5,
    budget_s=5.0,
    case_timeout_s=60,
)


def test_stops_at_min_samples_once_quiet():
    flush = FakeBuffer()
    runs = []
    timing = measure(
        lambda: runs.append(1), lambda: None, FakeStream([1.0] * 100), flush, FakeGate(), DEFAULTS
    )
    assert len(timing.samples_us) == 10 and timing.noise_pct <= DEFAULTS.noise_target_pct
    assert timing.median_us == pytest.approx(1000.0)
    assert flush.fills == 10  # L2 flushed before every sample
    assert len(runs) == 12  # 2 warm-up runs, untimed


def test_noisy_samples_run_to_max_samples_and_say_so():
    noisy = [1.0, 1.2] * 100
    timing = measure(
        lambda: None, lambda: None, FakeStream(noisy), FakeBuffer(), FakeGate(), DEFAULTS
    )
    assert len(timing.samples_us) == 50 and timing.noise_pct > DEFAULTS.noise_target_pct
    assert timing.noise_pct > 5


def test_a_median_known_within_its_precision_stops_samples_that_scatter():
    """One sample in four 30 % slow: the noise never falls to its target, but from 30 samples
    the median's interval is a single value, and sampling stops there, not at max_samples."""
    settings = dataclasses.replace(DEFAULTS, max_samples=500, median_min_samples=30)
    scattered = [1.0, 1.0, 1.0, 1.3] * 200
    timing = measure(
        lambda: None, lambda: None, FakeStream(scattered), FakeBuffer(), FakeGate(), settings
    )
    assert len(timing.samples_us) == 30 and timing.noise_pct > settings.noise_target_pct
    assert timing.median_us == pytest.approx(1000.0)


def test_a_median_not_yet_known_within_its_precision_samples_on():
    """Half the samples 20 % slow: the median's interval spans both values whatever the count,
    and a gap of 20 % is two modes, not the timer's step, so sampling runs to max_samples."""
    settings = dataclasses.replace(DEFAULTS, max_samples=80, median_min_samples=10)
    alternating = [1.0, 1.2] * 100
    timing = measure(
        lambda: None, lambda: None, FakeStream(alternating), FakeBuffer(), FakeGate(), settings
    )
    assert len(timing.samples_us) == 80


def test_a_median_known_to_one_step_of_the_timer_stops_where_its_interval_cannot_narrow():
    """A 3.3 us kernel timed in 32 ns steps, half its samples at or below one value and half at
    or above the next (1 % apart): the interval spans that step however many are taken, so the
    median is known as well as the timer can tell once its ends lie within one step. Within
    0.2 % alone it is never known, and such a kernel ran to max_samples."""
    settings = dataclasses.replace(DEFAULTS, max_samples=500, median_min_samples=100)
    steps = [0.003264, 0.003296, 0.003328, 0.003424] * 250  # ms, as events give them
    timing = measure(
        lambda: None, lambda: None, FakeStream(steps), FakeBuffer(), FakeGate(), settings
    )
    assert len(timing.samples_us) == 100
    assert timing.median_us == pytest.approx(3.312)
    samples_us = timing.samples_us + tuple(1000.0 * ms for ms in steps[100:500])
    assert not any(
        median_known(sorted(samples_us[:count]), settings.median_within_pct)
        for count in range(100, 501)
    )


def test_the_timer_step_is_the_smallest_difference_between_any_two_samples():
    rng = np.random.default_rng(5)
    rule = StopRule(DEFAULTS)
    # values as events give them: 32 ns steps, and now and then a float's rounding apart
    values = [
        float(k) * 0.032 + 3.0 + jitter
        for k, jitter in zip(rng.integers(0, 40, 200), rng.choice([0.0, 4e-13], 200), strict=True)
    ]
    for count, value in enumerate(values, start=1):
        rule.enough(value)
        seen = sorted(values[:count])
        gaps = [b - a for a, b in itertools.pairwise(seen) if b - a > 1e-6]
        assert rule.step == (min(gaps) if gaps else math.inf)
    assert rule.step == pytest.approx(0.032)


def test_budget_stops_a_slow_case():
    defaults = TimerSettings(1, 10, 500, 0.5, budget_s=0.0, case_timeout_s=60)
    noisy = [1.0, 1.2] * 300
    timing = measure(
        lambda: None, lambda: None, FakeStream(noisy), FakeBuffer(), FakeGate(), defaults
    )
    assert len(timing.samples_us) == 2


class LoggingStream(FakeStream):
    def __init__(self, log):
        super().__init__([1.0] * 100)
        self.log = log

    def record(self, event, options=None):
        self.log.append("event")
        return super().record(event, options)


class LoggingBuffer(FakeBuffer):
    def __init__(self, log):
        super().__init__()
        self.log = log

    def fill(self, value, stream):
        self.log.append("flush")


def test_each_sample_is_enqueued_whole_behind_the_gate_before_it_opens():
    log = []
    measure(
        lambda: log.append("run"),
        lambda: log.append("reset"),
        LoggingStream(log),
        LoggingBuffer(log),
        FakeGate(log),
        DEFAULTS,
    )
    warmup = ["reset", "run"] * DEFAULTS.warmup_runs
    sample = ["reset", "hold", "flush", "event", "run", "event", "release"]
    assert log == warmup + sample * DEFAULTS.min_samples


def test_the_gate_opens_even_when_the_run_raises():
    log = []
    calls = iter([None, None, RuntimeError("launch failed")])

    def run():
        if isinstance(error := next(calls), Exception):
            raise error

    with pytest.raises(RuntimeError, match="launch failed"):
        measure(run, lambda: None, FakeStream([1.0] * 10), FakeBuffer(), FakeGate(log), DEFAULTS)
    assert log == ["hold", "release"]


def test_summary_percentiles():
    timing = summarize([float(v) for v in range(1, 101)])
    assert timing.median_us == pytest.approx(50.5)
    assert timing.p10_us == pytest.approx(10.9)
    assert timing.p90_us == pytest.approx(90.1)


class FakeProbe:
    """Reports the next SM clock (MHz) of `clocks` for each sample, and logs its kernels."""

    def __init__(self, clocks, log=None):
        self.clocks = iter(clocks)
        self.log = log if log is not None else []

    def start(self, stream):
        self.log.append("probe")

    def stop(self, stream):
        self.log.append("probe")

    def mhz(self):
        return next(self.clocks)

    def queued_us(self, released_ns):
        return 0.0


def test_throttled_samples_are_discarded_and_counted(monkeypatch):
    monkeypatch.setattr("harness.run.timer.RECOVERY_S", 0.0)
    clocks = [1980.0, 1300.0, 1350.0] + [1975.0] * 20  # 1300 and 1350 are below 75 % of 1980
    durations = [1.0, 9.0, 9.0] + [1.0] * 20  # the throttled samples are the slow ones
    timing = measure(
        lambda: None,
        lambda: None,
        FakeStream(durations),
        FakeBuffer(),
        FakeGate(),
        DEFAULTS,
        FakeProbe(clocks),
        default_clock_mhz=1980.0,
    )
    assert timing.throttled_samples == 2
    assert timing.samples == 10 and max(timing.samples_us) == pytest.approx(1000.0)
    assert timing.sm_clock_mhz == round((1980 + 9 * 1975) / 10)


def test_past_the_budget_a_throttled_gpu_is_still_timed_at_its_clock():
    defaults = TimerSettings(0, 3, 10, 0.5, budget_s=0.0, case_timeout_s=60)
    timing = measure(
        lambda: None,
        lambda: None,
        FakeStream([2.0] * 20),
        FakeBuffer(),
        FakeGate(),
        defaults,
        FakeProbe([1000.0] * 20),
        default_clock_mhz=1980.0,
    )
    assert timing.throttled_samples == 0 and timing.samples == 2
    assert timing.sm_clock_mhz == 1000  # on the record: half the default clock


def test_the_clock_is_probed_outside_the_timed_events():
    log = []
    defaults = TimerSettings(0, 2, 2, 0.5, budget_s=5.0, case_timeout_s=60)
    measure(
        lambda: log.append("run"),
        lambda: None,
        LoggingStream(log),
        LoggingBuffer(log),
        FakeGate(log),
        defaults,
        FakeProbe([1980.0] * 2, log),
        default_clock_mhz=1980.0,
    )
    sample = ["hold", "flush", "probe", "event", "run", "event", "probe", "release"]
    assert log == sample * 2


def test_a_timing_keeps_the_median_of_its_samples_waits():
    class QueueProbe(FakeProbe):
        def __init__(self, waits):
            super().__init__([1980.0] * len(waits))
            self.waits = iter(waits)

        def queued_us(self, released_ns):
            return next(self.waits)

    defaults = TimerSettings(0, 5, 5, 100.0, budget_s=5.0, case_timeout_s=60)
    waits = [10.0, 2400.0, 2300.0, 12.0, 2500.0]
    stream = FakeStream([1.0] * 5)
    timing = measure(
        lambda: None, lambda: None, stream, FakeBuffer(), FakeGate(), defaults, QueueProbe(waits)
    )
    assert timing.queued_us == pytest.approx(2300.0)
    without = measure(
        lambda: None, lambda: None, FakeStream([1.0] * 5), FakeBuffer(), FakeGate(), defaults
    )
    assert without.queued_us is None  # no probe, no GPU-side start to measure from


def test_the_queue_is_the_start_beyond_the_quickest_recent_one():
    probe = ClockProbe.__new__(ClockProbe)
    probe._offsets = collections.deque(maxlen=2)
    probe._words = [0, 0, 0, 0]

    def started(gpu_ns, released_ns):
        probe._words[0] = gpu_ns
        return probe.queued_us(released_ns)

    # GPU and host clocks differ by 5 s: only the differences between samples count
    assert started(5_000_020_000, 20_000) == 0.0
    assert started(5_002_430_000, 30_000) == pytest.approx(2400.0)  # waited out a time slice
    assert started(5_000_035_000, 40_000) == 0.0  # on time, 5 us quicker than the first
    assert started(5_000_050_000, 50_000) == pytest.approx(5.0)
    assert started(5_000_160_000, 60_000) == pytest.approx(100.0)  # the clocks drift apart
    # once the quicker starts have left the window, the drift no longer counts as waiting
    assert started(5_000_170_000, 70_000) == pytest.approx(0.0)


def test_the_running_noise_is_the_relative_standard_deviation():
    values = [4.1, 3.9, 4.4, 4.0, 3.6, 4.2, 9.5, 4.0]
    noise = RunningNoise()
    assert noise.pct() == float("inf")
    for count, value in enumerate(values, 1):
        noise.add(value)
        if count >= 2:
            so_far = values[:count]
            want = 100 * statistics.stdev(so_far) / statistics.fmean(so_far)
            assert noise.pct() == pytest.approx(want, rel=1e-9)
