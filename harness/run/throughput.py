"""A timed cell's work over its time against the device's peaks: GB/s, TFLOPS, and roofline %
(the achieved share of the binding roof)."""

from __future__ import annotations

from harness.result import Throughput
from harness.run.device import DeviceInfo
from harness.spec import Work


def throughput(work: Work, median_us: float, device: DeviceInfo) -> Throughput:
    seconds = median_us * 1e-6
    gbytes_per_s = work.bytes / seconds / 1e9 if work.bytes else None
    tflops = work.flops / seconds / 1e12 if work.flops else None
    shares = []
    if device.peaks:
        if gbytes_per_s is not None:
            shares.append(100 * gbytes_per_s / device.peaks.memory_gb_per_s)
        if tflops is not None:
            shares.append(100 * tflops / device.peaks.tflops(work.math))
    # achieved / min(peak flops, intensity x bandwidth) = the larger share
    return Throughput(gbytes_per_s, tflops, max(shares) if shares else None)
