"""A timed cell's work over its time against the device's peaks: GB/s, TFLOPS, and roofline %
(the achieved share of the binding roof); and whether that is more than the device can do."""

from __future__ import annotations

from harness.model.cell import Throughput
from harness.model.errors import KernelFailed
from harness.model.spec import Work
from harness.run.device import DeviceInfo


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


def beyond_peak(work: Work, rate: Throughput, device: DeviceInfo) -> None:
    """KernelFailed saying why, when the timing is physically impossible on this device.

    Above a datasheet peak, either work() counts more than the kernel does, or the timed
    launches did less than the verified one (a kernel that keeps state between launches).
    """
    if device.peaks is None:
        return
    over = []
    if rate.gbytes_per_s is not None and rate.gbytes_per_s > device.peaks.memory_gb_per_s:
        over.append(
            f"{rate.gbytes_per_s:.0f} GB/s is above the {device.peaks.memory_gb_per_s:g} GB/s "
            "memory peak"
        )
    peak_tflops = device.peaks.tflops(work.math)
    if rate.tflops is not None and rate.tflops > peak_tflops:
        over.append(
            f"{rate.tflops:.1f} TFLOPS is above the {peak_tflops:g} TFLOPS {work.math.value} peak"
        )
    if over:
        raise KernelFailed(
            f"impossible timing on {device.name}: {' and '.join(over)}; either the spec's work() "
            "overcounts, or the timed launches did less work than the verified one"
        )
