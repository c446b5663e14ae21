"""Cold-cache timing, after nvbench: flush L2, time one run with events, repeat until quiet.

Each sample is preceded by a memset over a buffer at least as large as the device's L2, so that
every run reads its inputs from DRAM as a real first call would. The stream is held at a gate
while the flush, the events and the run are enqueued, and released once all are, so the host's
launch overhead (large for a library called from Python) never sits inside the timed interval.
Sampling stops once the relative noise is under the target with enough samples, or when the
case's wall-time budget is spent.
"""

from __future__ import annotations

import ctypes
import statistics
import time
from collections.abc import Callable

from cuda.bindings import driver
from cuda.core import Buffer, EventOptions

from harness.build.matrix import TimingDefaults
from harness.result import Timing


def summarize(samples_us: list[float], wall_s: float = 0.0) -> Timing:
    ordered = sorted(samples_us)
    deciles = statistics.quantiles(ordered, n=10, method="inclusive") if len(ordered) > 1 else []
    return Timing(
        median_us=statistics.median(ordered),
        p10_us=deciles[0] if deciles else ordered[0],
        p90_us=deciles[-1] if deciles else ordered[0],
        noise_pct=_noise_pct(ordered),
        samples_us=tuple(samples_us),
        wall_s=wall_s,
    )


def _noise_pct(samples: list[float]) -> float:
    if len(samples) < 2:
        return float("inf")
    return 100.0 * statistics.stdev(samples) / statistics.fmean(samples)


class StreamGate:
    """A word of pinned host memory that a stream can be made to wait on (nvbench's blocking
    kernel, done with cuStreamWaitValue32): work enqueued behind `hold` starts at `release`."""

    def __init__(self):
        self._host = _checked(driver.cuMemHostAlloc(4, driver.CU_MEMHOSTALLOC_DEVICEMAP))
        self._device = _checked(driver.cuMemHostGetDevicePointer(self._host, 0))
        self._word = ctypes.c_uint32.from_address(self._host)
        self._word.value = 0

    def hold(self, stream) -> None:
        self._word.value = 0
        flags = driver.CUstreamWaitValue_flags.CU_STREAM_WAIT_VALUE_EQ
        _checked(driver.cuStreamWaitValue32(stream.handle, self._device, 1, flags))

    def release(self) -> None:
        self._word.value = 1


def _checked(result):
    err, *rest = result
    if err != driver.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"timing gate: {driver.cuGetErrorName(err)[1].decode()}")
    return rest[0] if rest else None


def measure(
    run: Callable[[], None],
    before_each: Callable[[], None],
    stream,
    flush: Buffer,
    gate: StreamGate,
    defaults: TimingDefaults,
) -> Timing:
    """Time `run` (which enqueues work on `stream`); `before_each` resets state, untimed.

    `run` must only enqueue: a run that waits on its own stream would wait on the gate forever.
    """
    started = time.monotonic()
    for _ in range(defaults.warmup_runs):
        before_each()
        run()
    stream.sync()
    options = EventOptions(timing_enabled=True)
    samples: list[float] = []
    while len(samples) < defaults.max_samples:
        before_each()  # may wait on the stream: before the gate closes
        gate.hold(stream)
        try:
            flush.fill(len(samples) & 0xFF, stream=stream)
            begin = stream.record(options=options)
            run()
            end = stream.record(options=options)
        finally:
            gate.release()
        end.sync()
        samples.append((end - begin) * 1000.0)
        enough = len(samples) >= defaults.min_samples
        if enough and _noise_pct(samples) <= defaults.noise_target_pct:
            break
        if time.monotonic() - started > defaults.budget_s and len(samples) >= 2:
            break
    return summarize(samples, time.monotonic() - started)
