"""The vendor baseline around a kernel's timing: its properties, and a library that is absent."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from harness.model.cell import VendorTiming
from harness.run.timer import summarize
from harness.run.vendor_timing import measure_vendor
from harness.spec import Case, StreamRef, Vendor, Work
from harness.vendor import torch_matmul

CASE = Case("m4_n4_k4", {"M": 4, "N": 4, "K": 4})
INPUTS = {"a": np.ones((4, 4), np.float32), "b": np.ones((4, 4), np.float32)}
STREAM = StreamRef(handle=0, device=0)
KERNEL = summarize([200.0] * 10)  # the kernel's own timing: 200 us


def _never_set_up(run):
    raise AssertionError("set up a library that prepare() did not give")


def _measured_at(median_us: float, said: list[str] | None = None):
    runs = []

    def measure(run):
        run()
        runs.append(run)
        if said is not None:
            said.append("timed")
        return summarize([median_us] * 10)

    return measure, runs


def test_the_vendor_is_set_up_then_timed_by_the_given_protocol_and_compared_with_the_kernel():
    said = []
    vendor = Vendor("lib.gemm", lambda case, inputs, stream: lambda: said.append(case.name))

    def set_up(run):
        run()
        said.append("set up")

    measure, runs = _measured_at(250.0, said)
    shown = measure_vendor(vendor, CASE, INPUTS, STREAM, set_up, measure, KERNEL, Work(flops=10**9))
    # its first call is set_up's, before the timing's (in the runtime: under the shared hold,
    # where the timing's warm-up would be under the exclusive one)
    assert said == ["m4_n4_k4", "set up", "m4_n4_k4", "timed"] and len(runs) == 1
    assert shown == VendorTiming(
        library="lib.gemm",
        median_us=250.0,
        noise_pct=0.0,
        tflops=pytest.approx(4.0),
        ratio=1.25,  # the vendor took longer: the kernel is the faster
    )


def test_a_library_that_is_not_installed_is_said_so_and_nothing_is_timed():
    def prepare(case, inputs, stream):
        raise ImportError("No module named 'torch'")

    measure, runs = _measured_at(1.0)
    shown = measure_vendor(
        Vendor("torch", prepare), CASE, INPUTS, STREAM, _never_set_up, measure, KERNEL, Work()
    )
    assert shown == VendorTiming("torch", unavailable="No module named 'torch'")
    assert runs == []


def test_a_broken_vendor_call_is_the_specs_error_and_propagates():
    def prepare(case, inputs, stream):
        return inputs["no_such_buffer"]

    measure, _ = _measured_at(1.0)
    with pytest.raises(KeyError, match="no_such_buffer"):
        measure_vendor(
            Vendor("lib", prepare), CASE, INPUTS, STREAM, _never_set_up, measure, KERNEL, Work()
        )


@pytest.mark.skipif(importlib.util.find_spec("torch") is not None, reason="torch is installed")
def test_torch_matmul_without_torch_is_unavailable_not_an_error():
    measure, runs = _measured_at(1.0)
    vendor = torch_matmul("a", "b")
    shown = measure_vendor(vendor, CASE, INPUTS, STREAM, _never_set_up, measure, KERNEL, Work())
    assert shown.library == "torch.matmul (cuBLAS)" and "torch" in shown.unavailable
    assert runs == []
