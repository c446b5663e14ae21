"""A cell of the matrix, (kernel, case, target, device), and the one outcome it ends with."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


class Outcome(enum.Enum):
    PASSED = "passed"
    FAILED = "failed"  # wrong output, compile error, kernel fault, timeout
    ERROR = "error"  # the harness or the spec broke
    SKIPPED = "skipped"


class SkipReason(enum.Enum):
    TARGET_UNSUPPORTED = "target-unsupported"  # the kernel needs more than the target offers
    DEVICE_UNSUPPORTED = "device-unsupported"  # this device cannot run the target's binary
    NO_DEVICE = "no-device"  # no CUDA device visible


@dataclass
class Cell:
    classname: str  # <chapter>.<kernel>
    name: str  # <case>[<target>], or compile[<target>]
    outcome: Outcome
    message: str = ""
    skip_reason: SkipReason | None = None
    detail: str = ""  # long text for system-out: the nvcc log, a traceback
    seconds: float = 0.0
    properties: dict[str, str] = field(default_factory=dict)
    samples_us: tuple[float, ...] = ()
    resources: dict[str, dict[str, int]] = field(default_factory=dict)  # per entry, compile cells


def skipped(classname: str, name: str, reason: SkipReason, message: str, properties) -> Cell:
    return Cell(
        classname,
        name,
        Outcome.SKIPPED,
        message=f"{reason.value}: {message}",
        skip_reason=reason,
        properties=dict(properties),
    )
