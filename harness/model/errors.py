"""Failing, said one way. Where a value may be missing (no toolchain, no device, no build), the
value is `Unavailable` with why. Where a cell's work fails, the code that fails raises a CellError
of the class that decides the outcome (KernelFailed, Broken, SpecError, Skip), and whoever owns
the cell settles it from that error (`Cell.settle`), once. A report that cannot be read is a
ReportError naming its file. What the person running a command can fix (a matrix, a selection,
an option) is a UsageError: one line naming the file, line, option or kernel, and the command's
exit status; the command line prints it, and nothing else turns an error into an exit status.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from harness.model.outcome import Outcome, SkipReason


@dataclass(frozen=True)
class Unavailable:
    """A value that is missing here, and why: no nvcc, no device, no compute-sanitizer, no build."""

    why: str


class CellError(Exception):
    """Raised where a cell's work fails; its class decides the cell's outcome (Cell.settle), its
    message is the cell's message, `detail` the long text (a traceback, a log)."""

    outcome: ClassVar[Outcome] = Outcome.FAILED
    skip_reason: SkipReason | None = None

    def __init__(self, message: str, detail: str = ""):
        super().__init__(message)
        self.detail = detail


class KernelFailed(CellError):
    """The kernel failed: its build, its launch, its output, or the process running it."""


class Broken(CellError):
    """The harness could not judge the kernel: a tool it needs is missing or broke."""

    outcome = Outcome.ERROR


class SpecError(Broken):
    """The kernel's spec broke: it raised, or broke the spec API's contract."""


class Skip(CellError):
    """The cell cannot run here, for a machine-readable reason."""

    outcome = Outcome.SKIPPED

    def __init__(self, reason: SkipReason, why: str):
        super().__init__(f"{reason.value}: {why}")
        self.skip_reason = reason
        self.reason, self.why = reason, why

    @classmethod
    def as_said(cls, reason: SkipReason, message: str) -> Skip:
        """The skip of a cell another process settled, its message kept as it was said."""
        return cls(reason, message.removeprefix(f"{reason.value}: "))

    def adding(self, more: str) -> Skip:
        """This skip, with `more` said after its why."""
        return Skip(self.reason, f"{self.why}; {more}")


class UsageError(Exception):
    """A command that cannot start as asked, and what to fix: its message is one line that
    names the file and line, the option or the kernel; the command exits with `exit_code`."""

    exit_code: ClassVar[int] = 2


class ReportError(Exception):
    """A report that cannot be used; the message starts with its file name."""
