"""A timed cell's numbers for the report: its timing, and its work over its time against the
device's peaks (GB/s, TFLOPS, and roofline %: the achieved share of the binding roof)."""

from __future__ import annotations

from harness.device import DeviceInfo, sm_clock_mhz
from harness.spec import Work
from harness.timing import Timing


def throughput(work: Work, median_us: float, device: DeviceInfo) -> dict[str, str]:
    seconds = median_us * 1e-6
    properties: dict[str, str] = {}
    shares = []
    if work.bytes:
        gbytes_per_s = work.bytes / seconds / 1e9
        properties["gbytes_per_s"] = f"{gbytes_per_s:.1f}"
        if device.peaks:
            shares.append(100 * gbytes_per_s / device.peaks.memory_gb_per_s)
    if work.flops:
        tflops = work.flops / seconds / 1e12
        properties["tflops"] = f"{tflops:.2f}"
        if device.peaks:
            shares.append(100 * tflops / device.peaks.tflops(work.math))
    if shares:  # achieved / min(peak flops, intensity x bandwidth) = the larger share
        properties["roofline_pct"] = f"{max(shares):.1f}"
    return properties


def timing_properties(timing: Timing, work: Work, device: DeviceInfo) -> dict[str, str]:
    clock = sm_clock_mhz(device)
    return {
        "time_median_us": f"{timing.median_us:.3f}",
        "time_p10_us": f"{timing.p10_us:.3f}",
        "time_p90_us": f"{timing.p90_us:.3f}",
        "noise_pct": f"{timing.noise_pct:.3f}",
        "samples": str(len(timing.samples_us)),
        "sm_clock_mhz": str(clock) if clock else "unknown",
        **throughput(work, timing.median_us, device),
    }
