"""What a person watching a run sees while it goes: cells done of total, failures so far, the
current kernel, elapsed and estimated time.

On a terminal it is one live line (rich); in CI, or when output is not a terminal, or without
rich, one plain line per finished cell, which logs keep.
"""

from __future__ import annotations

import os
import sys
import time
from typing import TextIO

from harness.result import Cell, Outcome


class Progress:
    def __init__(self, total: int, expected_s: float = 0.0, out: TextIO | None = None):
        self.total, self.expected_s = total, expected_s
        self.out = out or sys.stdout
        self.done = self.failures = 0
        self.started = time.monotonic()
        self._live = _live_display(self.out) if total else None

    def finished(self, cell: Cell) -> None:
        self.done += 1
        self.failures += cell.outcome in (Outcome.FAILED, Outcome.ERROR)
        line = self.line(cell)
        if self._live is not None:
            self._live.update(line)
        else:
            print(line, file=self.out, flush=True)

    def line(self, cell: Cell) -> str:
        elapsed = time.monotonic() - self.started
        left = elapsed / self.done * (self.total - self.done) if self.done else self.expected_s
        return (
            f"[{self.done}/{self.total}] {cell.outcome.value.upper():7} "
            f"{cell.classname}::{cell.name} ({cell.seconds:.1f} s); "
            f"{self.failures} failed so far, {elapsed:.0f} s elapsed, ~{left:.0f} s left"
        )

    def close(self) -> None:
        if self._live is not None:
            self._live.stop()


class _RichLine:
    def __init__(self, out: TextIO):
        from rich.console import Console
        from rich.live import Live

        self._live = Live("", console=Console(file=out), refresh_per_second=8, transient=True)
        self._live.start()

    def update(self, line: str) -> None:
        self._live.update(line)

    def stop(self) -> None:
        self._live.stop()


def _live_display(out: TextIO) -> _RichLine | None:
    if os.environ.get("CI") or not out.isatty():
        return None
    try:
        return _RichLine(out)
    except ImportError:  # rich is optional: plain lines instead
        return None
