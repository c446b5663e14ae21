"""What a person watching a run sees: while it goes, cells done of total, failures so far, the
current kernel, elapsed and estimated time; at its end, every cell and where the time went.

On a terminal the progress is one live line (rich); in CI, or when output is not a terminal, or
without rich, one plain line per finished cell, which logs keep.
"""

from __future__ import annotations

import os
import sys
import time
from collections import Counter
from collections.abc import Sequence
from typing import TextIO

from harness.model.cell import Cell, Report
from harness.model.errors import Unavailable
from harness.model.outcome import CellKind, Outcome
from harness.model.text import shown_controls
from harness.pipeline.results import RunResult
from harness.run.device import DeviceInfo


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
            f"{one_line(cell.classname)}::{one_line(cell.name)} ({cell.seconds:.1f} s); "
            f"{self.failures} failed so far, {elapsed:.0f} s elapsed, ~{left:.0f} s left"
        )

    def close(self) -> None:
        if self._live is not None:
            self._live.stop()


class CountProgress:
    """A line while a stage works through its items, on a terminal and in CI alike: items done
    of all, and the time so far, at most one a second and always the last (a cold compile, or
    the CPU's check of a target's specs, takes tens of seconds on a small machine)."""

    EVERY_S = 1.0

    def __init__(self, label: str, items: str, doing: str, total: int) -> None:
        self.label, self.items = label, items
        self.started = time.monotonic()
        self.said = self.started
        if total:
            print(f"{label}: {total} {items}, {doing} ...", flush=True)

    def __call__(self, finished: int, total: int) -> None:
        now = time.monotonic()
        if finished < total and now - self.said < self.EVERY_S:
            return
        self.said = now
        print(
            f"{self.label}: {finished}/{total} {self.items}, {now - self.started:.1f} s",
            flush=True,
        )


class ProgressLines:
    """The console's sink (harness.pipeline.results): a Progress over the cells the GPUs are
    expected to settle, from when they are announced to the run's end."""

    def __init__(self, out: TextIO | None = None):
        self.out = out
        self._progress: Progress | None = None

    def begin(self, report: Report) -> None:
        pass  # the command said what it runs; progress starts with the GPUs' cells

    def expect(self, cells: int, seconds: float) -> None:
        self._progress = Progress(cells, seconds, self.out)

    def added(self, report: Report, cells: Sequence[Cell]) -> None:
        if self._progress is not None:
            for cell in cells:
                self._progress.finished(cell)

    def end(self, report: Report) -> None:
        if self._progress is not None:
            self._progress.close()


class _RichLine:
    def __init__(self, out: TextIO):
        from rich.console import Console
        from rich.live import Live

        self._live = Live("", console=Console(file=out), refresh_per_second=8, transient=True)
        self._live.start()

    def update(self, line: str) -> None:
        from rich.text import Text

        self._live.update(Text(line))  # as it is: a name's "[red]" is no markup

    def stop(self) -> None:
        self._live.stop()


def _live_display(out: TextIO) -> _RichLine | None:
    if os.environ.get("CI") or not out.isatty():
        return None
    try:
        return _RichLine(out)
    except ImportError:  # rich is optional: plain lines instead
        return None


def print_devices(found: list[DeviceInfo] | Unavailable) -> None:
    if isinstance(found, Unavailable):
        print(f"device: none ({found.why}); run cells are skipped no-device")
        return
    for device in found:
        print(f"device {device.ordinal}: {device.name}, CC {device.cc}, driver {device.driver}")


def print_summary(result: RunResult) -> None:
    """The run's compile counts, a line per cell, its outcome counts and where its time went."""
    if result.compiled == 0 and result.cached:
        print(f"compile: nothing to do, {result.cached} binaries cached")
    else:
        print(f"compile: {result.compiled} compiled, {result.cached} cached")
    for cell in result.cells:
        mark = cell.outcome.value.upper()
        line = f"  {mark:8} {one_line(cell.classname)}::{one_line(cell.name)}"
        if cell.timing:
            line += f"  {cell.timing.median_us:.1f} us"
            rate = cell.throughput
            if rate and rate.tflops is not None:
                line += f"  {rate.tflops:.2f} TFLOPS"
            if rate and rate.gbytes_per_s is not None:
                line += f"  {rate.gbytes_per_s:.1f} GB/s"
            if rate and rate.roofline_pct is not None:
                line += f"  {rate.roofline_pct:.1f}% of roofline"
            line += f"  [{cell.loaded_as}]"
        elif cell.outcome is not Outcome.PASSED:
            line += f"  -- {one_line(cell.message)}"
        print(line)
    counts = Counter(cell.outcome.value for cell in result.cells)
    reasons = Counter(cell.skip_reason.value for cell in result.cells if cell.skip_reason)
    summary = ", ".join(f"{counts.get(o.value, 0)} {o.value}" for o in Outcome)
    detail = ", ".join(f"{n} {r}" for r, n in sorted(reasons.items()))
    print(f"{result.files.xml.name}: {summary}" + (f" ({detail})" if detail else ""))
    if result.report.shared_gpu:
        print(f"GPU shared: {result.report.shared_gpu}")
    if result.report.wall_s is not None:
        print(time_split(result.report))


def one_line(text: str) -> str:
    """A name or message as a terminal shows it: on its line, its control characters (ESC,
    BEL, NUL) written as \\xNN rather than sent to restyle or ring the terminal."""
    return shown_controls(" ".join(text.splitlines()).replace("\t", " "))


def time_split(report: Report) -> str:
    """Where the run's wall time went: the cells' stages summed, beside the whole."""
    stages = [cell.stages for cell in report.cells if cell.stages]
    split = ", ".join(
        f"{name} {sum(getattr(s, f'{name}_s') for s in stages):.1f} s"
        for name in ("setup", "reference", "verify", "timing")
    )
    compile_s = sum(cell.seconds for cell in report.cells if cell.kind is CellKind.COMPILE)
    said = f"time: wall {report.wall_s:.1f} s; compile {compile_s:.1f} s; {split}"
    waited = [
        (cell.stages.waited_s, cell.seconds)
        for cell in report.cells
        if cell.stages and cell.stages.waited_s
    ]
    if waited:  # what the cases cost beyond their own time: the pipe, the workers' bookkeeping
        total, own = sum(w for w, _ in waited), sum(s for _, s in waited)
        beyond = f"{total - own:.1f} s beyond the cases' own"
        # of that, the waits for a worker still starting (its imports, CUDA context, setup)
        starting = sum(cell.worker_start_s or 0.0 for cell in report.cells if cell.stages)
        if starting:
            beyond += f", {starting:.1f} s of it for workers to start"
        said += f"; waited on workers {total:.1f} s ({beyond})"
    host = sum(s.host_wait_s for s in stages)
    gpu = sum(s.gpu_wait_s for s in stages)
    if host or gpu:  # within the workers: what the cases' own seconds waited for
        said += f"; cases waited {host:.1f} s for their host work, {gpu:.1f} s for the GPU's lock"
    return said
