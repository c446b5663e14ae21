"""What a cell came to: its outcome, why it was skipped, and what kind of cell it is."""

from __future__ import annotations

import enum


class Outcome(enum.Enum):
    PASSED = "passed"
    FAILED = "failed"  # wrong output, compile error, kernel fault, timeout
    ERROR = "error"  # the harness or the spec broke
    SKIPPED = "skipped"


class SkipReason(enum.Enum):
    TARGET_UNSUPPORTED = "target-unsupported"  # the kernel needs more than the target offers
    DEVICE_UNSUPPORTED = "device-unsupported"  # this device cannot run the target's binary
    NO_DEVICE = "no-device"  # no CUDA device visible
    # the driver is older than the binary's toolkit needs: PTX of a newer CUDA to JIT, or a
    # binary of a newer CUDA major
    DRIVER_UNSUPPORTED = "driver-unsupported"
    # a compute-sanitizer tool cannot watch what the kernel does (synccheck and initcheck:
    # dynamic parallelism): that tool's cell only
    TOOL_UNSUPPORTED = "tool-unsupported"


class CellKind(enum.Enum):
    """What a cell is of, in the order reports list a kernel's rows."""

    SPEC = "spec"  # the kernel's spec could not be used: its one cell
    COMPILE = "compile"  # one build of the kernel for the target
    CASE = "case"  # one case run, verified and timed
    SANITIZER = "sanitizer"  # one case under one compute-sanitizer tool

    @property
    def rank(self) -> int:
        return list(CellKind).index(self)
