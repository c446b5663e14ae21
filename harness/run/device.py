"""The GPU this run sees, read from the driver; DeviceMissing says why there is none."""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass
from pathlib import Path
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


KERNEL_MODULE_VERSION = "/proc/driver/nvidia/version"


class DeviceMissing(Exception):
    """No CUDA device is visible here: no libcuda, no GPU, or no cuda-python."""


def probe(matrix: Matrix, ordinal: int = 0) -> DeviceInfo:
    """The device's attributes, read through the driver API: without a context on it (each
    worker makes its own; one here too took ~0.15 s of the run's start on an H200, and held its
    memory), and without cuda.core, whose import took ~0.4 s more there, on the run's critical
    path (the workers, forked from a server that imported it once, pay nothing). A device whose
    compute mode prohibits contexts is missing."""
    try:
        from cuda.bindings import driver

        from harness.run.checked import check

        check(driver.cuInit(0))
        device = check(driver.cuDeviceGet(ordinal))
        attribute = driver.CUdevice_attribute

        def read(name: str) -> int:
            return int(check(driver.cuDeviceGetAttribute(getattr(attribute, name), device)))

        mode = read("CU_DEVICE_ATTRIBUTE_COMPUTE_MODE")
        name = check(driver.cuDeviceGetName(256, device)).split(b"\0", 1)[0].decode()
        cc = ComputeCapability(
            read("CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR"),
            read("CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR"),
        )
        sm_count = read("CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT")
        l2_bytes = read("CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE")
        smem_optin_bytes = read("CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN")
        clock_khz = read("CU_DEVICE_ATTRIBUTE_CLOCK_RATE")
        version = int(check(driver.cuDriverGetVersion()))
    except Exception as error:  # no libcuda, no GPU, no cuda-python: all mean "no device"
        raise DeviceMissing(f"{type(error).__name__}: {error}") from error
    if mode == int(driver.CUcomputemode.CU_COMPUTEMODE_PROHIBITED):
        raise DeviceMissing(f"device {ordinal}: its compute mode prohibits CUDA contexts")
    cuda_driver = f"{version // 1000}.{version % 1000 // 10}"
    return DeviceInfo(
        ordinal=ordinal,
        name=name,
        cc=cc,
        driver=_kernel_driver_version() or cuda_driver,
        cuda_driver=cuda_driver,
        sm_count=sm_count,
        l2_bytes=l2_bytes,
        smem_optin_bytes=smem_optin_bytes,
        peaks=matrix.devices.get(name),
        default_sm_clock_mhz=clock_khz / 1000.0 or None,  # the driver says kHz
        uuid=_uuid(driver, device),
        memory_bytes=_memory_bytes(driver, device),
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


def _memory_bytes(driver: Any, device: Any) -> int | None:
    """The device's global memory; None where the driver does not say."""
    error, total = driver.cuDeviceTotalMem(device)
    return int(total) if error == driver.CUresult.CUDA_SUCCESS else None


def _uuid(driver: Any, device: Any) -> str | None:
    """This very GPU, as cuda.core spells it (8-4-4-4-12 hex digits); None where the driver does
    not say: an identity only, a GPU without one still runs every cell."""
    error, found = driver.cuDeviceGetUuid(device)
    if error != driver.CUresult.CUDA_SUCCESS:
        return None
    return uuid_text(bytes(found.bytes))


def uuid_text(raw: bytes) -> str:
    """A device's 16 UUID bytes as text: `2a96689d-0fe7-81a2-75e2-04a83d982cc3`."""
    digits = raw.hex()
    return "-".join((digits[:8], digits[8:12], digits[12:16], digits[16:20], digits[20:32]))


def _kernel_driver_version() -> str | None:
    """The kernel module's version (`580.159.04`), from the text it keeps in /proc; else from
    NVML; None where neither says (the CUDA version then identifies the driver)."""
    try:
        said = Path(KERNEL_MODULE_VERSION).read_text()
    except OSError:  # a container without the file, or not Linux
        said = ""
    if found := kernel_module_version(said):
        return found
    try:
        from cuda.core import system

        major, *rest = system.get_kernel_mode_driver_version()
        return ".".join([str(major), *(f"{part:02d}" for part in rest)])
    except Exception:  # NVML is optional: the CUDA version still identifies the driver
        return None


def kernel_module_version(said: str) -> str | None:
    """The version in /proc/driver/nvidia/version's first line (`NVRM version: NVIDIA UNIX
    x86_64 Kernel Module  580.159.04  ...`, or `... Open Kernel Module for x86_64  580.159.04
    ...`); None where it names none."""
    first = said.splitlines()[0] if said else ""
    found = re.search(r"Kernel Module\b.*?\s(\d+\.\d+(?:\.\d+)?)\s", first + " ")
    return found.group(1) if found else None
