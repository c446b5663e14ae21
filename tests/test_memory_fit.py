"""A case whose buffers the device cannot hold is skipped device-unsupported, with the figures."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from harness.model.matrix import ComputeCapability
from harness.run.device import DeviceInfo
from harness.run.launch import check_declared_fits, check_fits
from harness.spec import DeviceUnsupported, Problem

SMALL = DeviceInfo(
    0, "a 4 GiB GPU", ComputeCapability(9, 0), "580", "13.0", 132, 1, 1, None,
    memory_bytes=4 * 2**30,
)  # fmt: skip


def _problem() -> Problem:
    big = np.broadcast_to(np.zeros(1, np.float32), (1_500_000_000,))  # 5.6 GiB, never allocated
    return Problem(inputs={"x": big}, outputs={"y": np.empty(4, np.float32)}, launches=())


def test_a_case_whose_buffers_exceed_the_device_memory_is_device_unsupported():
    with pytest.raises(DeviceUnsupported) as raised:
        check_fits(_problem(), SMALL)
    assert str(raised.value) == (
        "device-unsupported: its buffers (inputs, outputs, scratch) need 5.59 GiB of device "
        "memory; a 4 GiB GPU has 4.00 GiB"
    )


def test_scratch_counts_twice_its_size_the_copy_each_run_starts_from_too():
    scratch = np.broadcast_to(np.zeros(1, np.float32), (600_000_000,))  # 2.24 GiB, never made
    problem = Problem(inputs={}, outputs={"y": np.empty(4, np.float32)}, launches=())
    check_fits(replace(problem, scratch={"s": scratch[:400_000_000]}), SMALL)  # 2 x 1.49 GiB
    with pytest.raises(
        DeviceUnsupported,
        match=r"scratch and the copy of the scratch each run starts from\) need 4\.47 GiB",
    ):
        check_fits(replace(problem, scratch={"s": scratch}), SMALL)


@pytest.mark.parametrize("memory_bytes", [141 * 2**30, None])
def test_a_case_that_fits_or_a_device_that_does_not_say_is_not_refused(memory_bytes):
    check_fits(_problem(), replace(SMALL, memory_bytes=memory_bytes))


def test_a_case_that_declares_more_than_the_device_has_is_skipped_before_its_setup():
    with pytest.raises(DeviceUnsupported) as raised:
        check_declared_fits(3 * 10**9 * 2, SMALL)
    assert str(raised.value) == (
        "device-unsupported: its case declares 5.59 GiB of device memory (device_bytes); "
        "a 4 GiB GPU has 4.00 GiB: skipped before setup()"
    )
    check_declared_fits(4 * 2**30, SMALL)  # exactly what it has
    check_declared_fits(None, SMALL)  # nothing declared: its buffers decide, after setup()
    check_declared_fits(2**50, replace(SMALL, memory_bytes=None))  # the device did not say
