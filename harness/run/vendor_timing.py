"""A spec's vendor baseline, timed beside the kernel on the same case by the same protocol."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from harness.model.cell import Timing, VendorTiming
from harness.model.spec import Case, StreamRef, Vendor, Work


def measure_vendor(
    vendor: Vendor,
    case: Case,
    inputs: Mapping[str, np.ndarray],
    stream: StreamRef,
    measure: Callable[[Callable[[], None]], Timing],
    kernel: Timing,
    work: Work,
) -> VendorTiming:
    """The vendor library's time for the same case, by the protocol that timed the kernel.

    ratio = vendor time / kernel time: above 1, the kernel is the faster. A library that is not
    installed is said so; any other error is the spec's and propagates.
    """
    try:
        run = vendor.prepare(case, inputs, stream)
    except ImportError as error:
        return VendorTiming(vendor.library, unavailable=str(error))
    timing = measure(run)
    return VendorTiming(
        library=vendor.library,
        median_us=timing.median_us,
        noise_pct=timing.noise_pct,
        tflops=work.flops / timing.median_us / 1e6 if work.flops else None,
        ratio=timing.median_us / kernel.median_us,
    )
