"""GB/s, TFLOPS and roofline % from a cell's work and median."""

from __future__ import annotations

import dataclasses

import pytest

from harness.model.cell import Throughput
from harness.model.errors import KernelFailed
from harness.model.matrix import ComputeCapability, DevicePeaks
from harness.run.device import DeviceInfo
from harness.run.throughput import beyond_peak, throughput
from harness.spec import Math, Work

H200 = DeviceInfo(
    ordinal=0,
    name="NVIDIA H200",
    cc=ComputeCapability(9, 0),
    driver="580.159.04",
    cuda_driver="13.0",
    sm_count=132,
    l2_bytes=60 * 2**20,
    smem_optin_bytes=227 * 2**10,
    peaks=DevicePeaks(memory_gb_per_s=4800, fp32_tflops=66.9, bf16_tensor_tflops=989.4),
)


def test_bytes_give_bandwidth_against_the_memory_peak():
    shown = throughput(Work(bytes=4_800_000_000), median_us=2_000, device=H200)  # 2 ms
    assert shown == Throughput(gbytes_per_s=pytest.approx(2400.0), roofline_pct=pytest.approx(50.0))


def test_flops_give_tflops_against_the_compute_peak():
    shown = throughput(Work(flops=2 * 4096**3), median_us=3085.5, device=H200)
    assert shown.tflops == pytest.approx(44.54, abs=0.005) and shown.gbytes_per_s is None
    assert shown.roofline_pct == pytest.approx(66.6, abs=0.05)


def test_tensor_core_flops_count_against_the_tensor_core_peak():
    bf16 = Work(flops=2 * 8192**3, math=Math.BF16_TENSOR)
    shown = throughput(bf16, median_us=2000.0, device=H200)  # 549.8 TFLOPS
    assert shown.tflops == pytest.approx(549.76, abs=0.005)
    assert shown.roofline_pct == pytest.approx(55.6, abs=0.05)


def test_with_both_the_binding_roof_counts():
    gemm = Work(bytes=4 * 3 * 4096**2, flops=2 * 4096**3)
    shown = throughput(gemm, median_us=3085.5, device=H200)
    assert shown.roofline_pct == pytest.approx(66.6, abs=0.05)  # compute-bound


def test_an_unlisted_device_gets_no_roofline():
    unknown = dataclasses.replace(H200, peaks=None)
    shown = throughput(Work(bytes=10**9), 1000.0, unknown)
    assert shown.roofline_pct is None and shown.gbytes_per_s == pytest.approx(1000.0)


def test_a_rate_above_a_datasheet_peak_is_impossible_and_says_why():
    copy = Work(bytes=10**9)
    assert beyond_peak(copy, throughput(copy, 250.0, H200), H200) is None  # 4000 GB/s
    with pytest.raises(KernelFailed) as impossible:
        beyond_peak(copy, throughput(copy, 100.0, H200), H200)  # 10 TB/s
    message = str(impossible.value)
    assert message.startswith("impossible timing on NVIDIA H200: 10000 GB/s is above the 4800")
    assert "work() overcounts" in message and "did less work than the verified one" in message
    gemm = Work(flops=2 * 8192**3, math=Math.BF16_TENSOR)
    assert beyond_peak(gemm, throughput(gemm, 1433.0, H200), H200) is None  # 767 TFLOPS
    fp32 = Work(flops=2 * 8192**3)  # the same flops on CUDA cores: 767 > 66.9 TFLOPS
    with pytest.raises(KernelFailed, match=r"TFLOPS is above the 66\.9 TFLOPS fp32 peak"):
        beyond_peak(fp32, throughput(fp32, 1433.0, H200), H200)
    unknown = dataclasses.replace(H200, peaks=None)
    assert beyond_peak(copy, throughput(copy, 1.0, unknown), unknown) is None
