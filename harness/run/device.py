"""The GPU this run sees, read from the driver; DeviceMissing says why there is none."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

from harness.model.matrix import ComputeCapability, DevicePeaks, Matrix


@dataclass(frozen=True)
class DeviceInfo:
    ordinal: int
    name: str
    cc: ComputeCapability
    driver: str  # "580.159.04" where NVML answers, else the CUDA version "13.0"
    cuda_driver: str  # the CUDA version the driver supports, "13.0"
    sm_count: int
    l2_bytes: int
    smem_optin_bytes: int
    peaks: DevicePeaks | None  # from matrix.yaml's devices, by name
    default_sm_clock_mhz: float | None = None  # what throttling is measured against
    uuid: str | None = None  # this very GPU, among many of its model; None: the driver did not say
    memory_bytes: int | None = None  # global memory; None: the driver did not say


class DeviceMissing(Exception):
    """No CUDA device is visible here: no libcuda, no GPU, or no cuda-python."""


def probe(matrix: Matrix, ordinal: int = 0) -> DeviceInfo:
    """The device's attributes, read without a context on it: each worker makes its own, and
    one here too would take ~0.15 s of the run's start on an H200 (and hold its memory) for
    nothing. A device whose compute mode prohibits contexts is missing."""
    try:
        from cuda.bindings import driver
        from cuda.core import Device

        device = Device(ordinal)
        properties = device.properties
        prohibited = driver.CUcomputemode.CU_COMPUTEMODE_PROHIBITED
        mode = properties.compute_mode
    except Exception as error:  # no libcuda, no GPU, no cuda-python: all mean "no device"
        raise DeviceMissing(f"{type(error).__name__}: {error}") from error
    if mode == int(prohibited):
        raise DeviceMissing(f"device {ordinal}: its compute mode prohibits CUDA contexts")
    _, version = driver.cuDriverGetVersion()
    cuda_driver = f"{version // 1000}.{version % 1000 // 10}"
    return DeviceInfo(
        ordinal=ordinal,
        name=device.name,
        cc=ComputeCapability(*device.compute_capability),
        driver=_kernel_driver_version() or cuda_driver,
        cuda_driver=cuda_driver,
        sm_count=properties.multiprocessor_count,
        l2_bytes=properties.l2_cache_size,
        smem_optin_bytes=properties.max_shared_memory_per_block_optin,
        peaks=matrix.devices.get(device.name),
        default_sm_clock_mhz=properties.clock_rate / 1000.0 or None,  # the driver says kHz
        uuid=_uuid(device),
        memory_bytes=_memory_bytes(driver, ordinal),
    )


def probe_all(matrix: Matrix) -> list[DeviceInfo]:
    """Every GPU this process sees (CUDA_VISIBLE_DEVICES decides which), in CUDA's order;
    DeviceMissing when there is none."""
    first = probe(matrix, 0)
    from cuda.bindings import driver

    error, count = driver.cuDeviceGetCount()
    if error != driver.CUresult.CUDA_SUCCESS:
        return [first]
    found = [first]
    for ordinal in range(1, count):
        with contextlib.suppress(DeviceMissing):  # one that cannot be opened is left out
            found.append(probe(matrix, ordinal))
    return found


def _memory_bytes(driver: Any, ordinal: int) -> int | None:
    """The device's global memory (cuda.core's properties do not give it)."""
    error, handle = driver.cuDeviceGet(ordinal)
    if error != driver.CUresult.CUDA_SUCCESS:
        return None
    error, total = driver.cuDeviceTotalMem(handle)
    return int(total) if error == driver.CUresult.CUDA_SUCCESS else None


def _uuid(device: object) -> str | None:
    try:
        return str(device.uuid)  # type: ignore[attr-defined]
    except Exception:  # an identity only: a driver that cannot say still runs every cell
        return None


def _kernel_driver_version() -> str | None:
    try:
        from cuda.core import system

        major, *rest = system.get_kernel_mode_driver_version()
        return ".".join([str(major), *(f"{part:02d}" for part in rest)])  # 580.159.04
    except Exception:  # NVML is optional: the CUDA version still identifies the driver
        return None
