"""The GPU as the probe reads it without cuda.core: its UUID and its kernel module's version
spelled as before (a carried verdict names the driver; the GPU's NVML handle, its UUID). On a
GPU, tests/test_on_gpu.py holds the probe to what cuda.core reads."""

from __future__ import annotations

from harness.run.device import kernel_module_version, uuid_text


def test_a_uuid_is_spelled_as_cuda_core_spells_it():
    raw = bytes.fromhex("2a96689d0fe781a275e204a83d982cc3")
    assert uuid_text(raw) == "2a96689d-0fe7-81a2-75e2-04a83d982cc3"


def test_the_kernel_module_version_is_read_from_either_driver_s_first_line():
    proprietary = (
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04  Thu Jul 10 20:15:40 UTC "
        "2025\nGCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n"
    )
    open_modules = (
        "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  "
        "(dvs-builder@U16-I3-B05-1-1)  Thu Jul 10 20:08:02 UTC 2025\n"
    )
    arm = "NVRM version: NVIDIA UNIX aarch64 Kernel Module  575.57.08  Sat May 24 2025\n"
    assert kernel_module_version(proprietary) == "580.159.04"
    assert kernel_module_version(open_modules) == "580.159.04"
    assert kernel_module_version(arm) == "575.57.08"
    assert kernel_module_version("") is None
    assert kernel_module_version("GCC version: gcc 12.2.0\n") is None
