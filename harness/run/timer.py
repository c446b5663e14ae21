"""Cold-cache timing, after nvbench: flush L2, time one run with events, repeat until quiet.

Each sample is preceded by a memset over a buffer at least as large as the device's L2, so that
every run reads its inputs from DRAM as a real first call would. The stream is held at a gate
while the flush, the events and the run are enqueued, and released once all are, so the host's
launch overhead (large for a library called from Python) never sits inside the timed interval.
Sampling stops once the relative noise is under the target with enough samples (NVBench's
rule), once the median is known well enough (its distribution-free 95 % interval, the one
verdicts judge by, within `median_within_pct` of it, or within one step of the timer where
that is more, from `median_min_samples` on), or when the case's wall-time budget is spent. The
second rule is ours: a small kernel's samples scatter by a few % however many are taken, so
NVBench's rule alone runs it to max_samples, long after its median stopped moving.

Throttling is detected as NVBench does it: a probe kernel records %globaltimer and clock64 on
SM 0 just before and just after each sample, their ratio is the SM clock over that sample, and a
sample whose clock fell below THROTTLE_FRACTION of the device's default clock is discarded (and
counted) after a pause for the GPU to recover. Past the budget nothing more is discarded, so a
GPU that never recovers still gets timed, its low clock on the record.
"""

from __future__ import annotations

import bisect
import collections
import ctypes
import math
import statistics
import time
from collections.abc import Callable, Sequence

from cuda.bindings import driver
from cuda.core import Buffer, EventOptions, Stream

from harness.model.cell import Timing
from harness.model.matrix import TimerSettings
from harness.model.median import median_known, sorted_median
from harness.run.checked import check

THROTTLE_FRACTION = 0.75  # of the default SM clock: NVBench's threshold
QUEUE_WINDOW = 256  # recent samples whose quickest start is the one that did not wait
RECOVERY_S = 0.05  # the pause after a throttled sample: NVBench's default
# A timer's step, the smallest difference between two samples, is believed to be its
# resolution (CUDA events count in 32 ns steps on an H200: 1 % of a 3.3 us kernel) where it is
# at most this share of the median; a larger one is a gap between two modes, not a step.
STEP_MOST_PCT = 1.0
STEP_LEAST_US = 1e-6  # a smaller difference is a float's rounding, not a step of any timer


def summarize(
    samples_us: list[float],
    wall_s: float = 0.0,
    clocks_mhz: Sequence[float] = (),
    throttled: int = 0,
    queued_us: Sequence[float] = (),
) -> Timing:
    ordered = sorted(samples_us)
    deciles = statistics.quantiles(ordered, n=10, method="inclusive") if len(ordered) > 1 else []
    return Timing(
        median_us=statistics.median(ordered),
        p10_us=deciles[0] if deciles else ordered[0],
        p90_us=deciles[-1] if deciles else ordered[0],
        noise_pct=_noise_pct(ordered),
        samples_us=tuple(samples_us),
        sm_clock_mhz=round(statistics.fmean(clocks_mhz)) if clocks_mhz else None,
        wall_s=wall_s,
        throttled_samples=throttled,
        queued_us=round(statistics.median(queued_us), 3) if queued_us else None,
    )


def _noise_pct(samples: list[float]) -> float:
    if len(samples) < 2:
        return float("inf")
    return 100.0 * statistics.stdev(samples) / statistics.fmean(samples)


class RunningNoise:
    """The relative standard deviation of the samples so far, updated in O(1) per sample
    (Welford's recurrence): the stopping rule asks after every sample, and recomputing
    statistics.stdev over hundreds of samples each time cost more host time than a small
    kernel's whole sample."""

    def __init__(self) -> None:
        self.count, self._mean, self._squares = 0, 0.0, 0.0

    def add(self, value: float) -> None:
        self.count += 1
        delta = value - self._mean
        self._mean += delta / self.count
        self._squares += delta * (value - self._mean)

    def pct(self) -> float:
        if self.count < 2 or self._mean == 0.0:
            return float("inf")
        return float(100.0 * (self._squares / (self.count - 1)) ** 0.5 / abs(self._mean))


class StopRule:
    """Whether the samples so far are enough, asked after each: max_samples of them; or, from
    min_samples on, a relative noise at most noise_target_pct (NVBench's rule); or, from
    median_min_samples on, the median known within median_within_pct, or within the timer's
    step where that is more (harness.model.median). The wall-time budget is measure()'s, not a
    property of the samples.

    The step matters below a few microseconds: on an H200 a 3.3 us kernel's samples take values
    32 ns (1 %) apart, so its median is one of them, and the interval of a kernel whose samples
    fall on two neighbouring values never narrows to 0.2 %; such a kernel ran to max_samples."""

    def __init__(self, settings: TimerSettings) -> None:
        self.settings = settings
        self.noise = RunningNoise()
        self.ordered: list[float] = []  # the samples ascending, kept so as each comes
        self.step = math.inf  # the smallest difference between two samples so far

    def enough(self, sample_us: float) -> bool:
        settings, count = self.settings, self.noise.count + 1
        self.noise.add(sample_us)
        self._insert(sample_us)
        return (
            count >= settings.max_samples
            or (count >= settings.min_samples and self.noise.pct() <= settings.noise_target_pct)
            or (
                count >= settings.median_min_samples
                and median_known(self.ordered, settings.median_within_pct, self.resolution())
            )
        )

    def resolution(self) -> float:
        """The timer's step as the samples show it, give or take a float's rounding; 0 where
        none is believed (STEP_MOST_PCT)."""
        median = sorted_median(self.ordered)
        if self.step > STEP_MOST_PCT / 100.0 * abs(median):
            return 0.0
        return self.step + STEP_LEAST_US

    def _insert(self, sample_us: float) -> None:
        """Into the ordered samples; a new value splits only the difference it falls in, so the
        smallest is kept from its two neighbours alone. Differences of rounding are none."""
        at = bisect.bisect(self.ordered, sample_us)
        for neighbour in self.ordered[max(at - 1, 0) : at + 1]:
            if (difference := abs(sample_us - neighbour)) > STEP_LEAST_US:
                self.step = min(self.step, difference)
        self.ordered.insert(at, sample_us)


class StreamGate:
    """A word of pinned host memory that a stream can be made to wait on (nvbench's blocking
    kernel, done with cuStreamWaitValue32): work enqueued behind `hold` starts at `release`."""

    def __init__(self) -> None:
        self._host = check(driver.cuMemHostAlloc(4, driver.CU_MEMHOSTALLOC_DEVICEMAP))
        self._device = check(driver.cuMemHostGetDevicePointer(self._host, 0))
        self._word = ctypes.c_uint32.from_address(self._host)
        self._word.value = 0

    def hold(self, stream: Stream) -> None:
        self._word.value = 0
        flags = driver.CUstreamWaitValue_flags.CU_STREAM_WAIT_VALUE_EQ
        check(driver.cuStreamWaitValue32(stream.handle, self._device, 1, flags))

    def release(self) -> None:
        self._word.value = 1


# One thread per SM; the one on SM 0 records the global timer (ns) and its own clock counter.
_TIMESTAMPS_PTX = """
.version 7.0
.target sm_70
.address_size 64
.visible .entry timestamps(.param .u64 out)
{
    .reg .pred %p<2>;
    .reg .b32 %r<2>;
    .reg .b64 %rd<5>;
    mov.u32 %r1, %smid;
    setp.ne.u32 %p1, %r1, 0;
    @%p1 bra DONE;
    ld.param.u64 %rd1, [out];
    cvta.to.global.u64 %rd2, %rd1;
    mov.u64 %rd3, %globaltimer;
    mov.u64 %rd4, %clock64;
    st.global.u64 [%rd2], %rd3;
    st.global.u64 [%rd2+8], %rd4;
DONE:
    ret;
}
"""


class ClockProbe:
    """The SM clock over one sample, from timestamps taken on SM 0 before and after it (NVBench's
    gpu_frequency): clock64 ticks over %globaltimer nanoseconds. PTX, so the driver builds it for
    whatever GPU this is, with no compiler at hand."""

    def __init__(self, sm_count: int):
        from cuda.core import LaunchConfig, ObjectCode

        # (GPU start - host release) of the last QUEUE_WINDOW samples, in ns
        self._offsets: collections.deque[int] = collections.deque(maxlen=QUEUE_WINDOW)
        # bytes: a str would name a file
        self._kernel = ObjectCode.from_ptx(_TIMESTAMPS_PTX.encode()).get_kernel("timestamps")
        self._config = LaunchConfig(grid=sm_count, block=1)
        self._host = check(driver.cuMemHostAlloc(32, driver.CU_MEMHOSTALLOC_DEVICEMAP))
        self._device = int(check(driver.cuMemHostGetDevicePointer(self._host, 0)))
        self._words = (ctypes.c_uint64 * 4).from_address(self._host)

    def warm(self, stream: Stream) -> None:
        """Launch both probes once, ungated. With lazy module loading a kernel's first launch
        loads it into the context, which waits for the context's streams: a first launch behind
        the gate (whose stream waits for the host) would wait for ever."""
        self.start(stream)
        self.stop(stream)
        stream.sync()

    def start(self, stream: Stream) -> None:
        self._record(stream, 0)

    def stop(self, stream: Stream) -> None:
        self._record(stream, 16)

    def _record(self, stream: Stream, offset: int) -> None:
        from cuda.core import launch

        launch(stream, self._config, self._kernel, ctypes.c_uint64(self._device + offset))

    def mhz(self) -> float:
        """The clock between the last start and stop; call once the stream has passed both."""
        start_ns, start_clock, stop_ns, stop_clock = self._words
        return (stop_clock - start_clock) / max(stop_ns - start_ns, 1) * 1e3

    def queued_us(self, released_ns: int) -> float:
        """How much longer than the quickest of the recent samples the last one took from the
        host opening its gate (`released_ns`, time.monotonic_ns) to its start probe on the GPU.

        Both instants are taken where nothing else can delay them: the host's before it opens
        the gate, the GPU's by the probe kernel. Their clocks differ by an offset, and the least
        offset of the recent samples is what a sample that did not wait sees; the window keeps
        any drift between the two clocks out of it."""
        offset = int(self._words[0]) - released_ns
        self._offsets.append(offset)
        return (offset - min(self._offsets)) / 1e3


class ColdSampler:
    """One cold sample at a time of whatever `run` enqueues: L2 flushed, the stream gated while
    the flush, the probe, the events and the run are enqueued, then released and waited for.

    With a probe, `queued_us` says how long the last sample waited for the GPU after the gate
    opened (ClockProbe.queued_us). On a GPU of its own that is the gate's wake-up latency;
    where another process keeps the GPU busy, its work is time-sliced with ours and a sample
    waits out its slice first (0.3-2.5 ms on an H200 beside bf16 GEMMs, against 7-25 us alone).
    """

    def __init__(
        self, stream: Stream, flush: Buffer, gate: StreamGate, probe: ClockProbe | None = None
    ):
        self.stream, self.flush, self.gate, self.probe = stream, flush, gate, probe
        options = EventOptions(timing_enabled=True)
        # recorded again each sample: no event churn
        self._begin = stream.device.create_event(options)
        self._end = stream.device.create_event(options)
        self.count = 0
        self.queued_us: float | None = None  # of the last sample; None: no probe

    def sample(self, run: Callable[[], None], before_each: Callable[[], None]) -> float:
        """The microseconds of one run; `before_each` resets state first, untimed."""
        before_each()  # may wait on the stream: before the gate closes
        self.gate.hold(self.stream)
        try:
            self.flush.fill(self.count & 0xFF, stream=self.stream)
            if self.probe:
                self.probe.start(self.stream)
            self.stream.record(self._begin)
            run()
            self.stream.record(self._end)
            if self.probe:
                self.probe.stop(self.stream)
        finally:
            released_ns = time.monotonic_ns()
            self.gate.release()
        self.stream.sync()
        if self.probe:
            self.queued_us = self.probe.queued_us(released_ns)
        self.count += 1
        return float(self._end - self._begin) * 1000.0  # cuda.core's events subtract to ms


def measure(
    run: Callable[[], None],
    before_each: Callable[[], None],
    stream: Stream,
    flush: Buffer,
    gate: StreamGate,
    defaults: TimerSettings,
    probe: ClockProbe | None = None,
    default_clock_mhz: float | None = None,
) -> Timing:
    """Time `run` (which enqueues work on `stream`); `before_each` resets state, untimed.

    `run` must only enqueue: a run that waits on its own stream would wait on the gate forever.
    With a probe and the device's default clock, throttled samples are discarded and counted.
    """
    started = time.monotonic()
    for _ in range(defaults.warmup_runs):
        before_each()
        run()
    stream.sync()
    sampler = ColdSampler(stream, flush, gate, probe)
    samples: list[float] = []
    stop = StopRule(defaults)
    clocks: list[float] = []
    queued: list[float] = []
    throttled = 0
    while True:
        sample_us = sampler.sample(run, before_each)
        if sampler.queued_us is not None:
            queued.append(sampler.queued_us)
        spent = time.monotonic() - started
        if probe:
            clock = probe.mhz()
            floor = THROTTLE_FRACTION * default_clock_mhz if default_clock_mhz else 0.0
            if clock < floor and spent <= defaults.budget_s:
                throttled += 1
                time.sleep(RECOVERY_S)  # let the GPU cool down before the next sample
                continue
            clocks.append(clock)
        samples.append(sample_us)
        if stop.enough(sample_us):
            break
        if spent > defaults.budget_s and len(samples) >= 2:
            break
    return summarize(samples, time.monotonic() - started, clocks, throttled, queued)
