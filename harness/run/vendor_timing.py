"""A spec's vendor baseline, timed beside the kernel on the same case by the same protocol."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping

import numpy as np

from harness.model.cell import Timing, VendorTiming
from harness.model.spec import Case, StreamRef, Vendor, Work


def measure_vendor(
    vendor: Vendor,
    case: Case,
    inputs: Mapping[str, np.ndarray],
    stream: StreamRef,
    set_up: Callable[[Callable[[], None]], None],
    measure: Callable[[Callable[[], None]], Timing],
    kernel: Timing,
    work: Work,
) -> VendorTiming:
    """The vendor library's time for the same case, by the protocol that timed the kernel,
    after `set_up` has made its first call, untimed and waited for: where a library sets
    itself up on the GPU (cuBLAS: its handle, workspace and kernels), which `measure`'s
    warm-up, in the timing's exclusive hold, would otherwise do.

    ratio = vendor time / kernel time: above 1, the kernel is the faster. A library that is not
    installed is said so; any other error is the spec's and propagates.
    """
    try:
        run = vendor.prepare(case, inputs, stream)
    except ImportError as error:
        return VendorTiming(vendor.library, unavailable=str(error))
    set_up(run)
    timing = measure(run)
    return VendorTiming(
        library=vendor.library,
        median_us=timing.median_us,
        noise_pct=timing.noise_pct,
        tflops=work.flops / timing.median_us / 1e6 if work.flops else None,
        ratio=timing.median_us / kernel.median_us,
    )


def import_quietly(module: str) -> None:
    """`module`, which a vendor's prepare() imports, imported ahead of it; where it cannot be,
    prepare() raises and its cell says why."""
    try:
        importlib.import_module(module)
    except Exception:  # ImportError and whatever a broken install raises: prepare()'s to report
        return
