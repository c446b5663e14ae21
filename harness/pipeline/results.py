"""Where a run's cells go: into its report, and from there to every sink (harness.report.store's
LiveReport writes the JSON and JUnit files, console.ProgressLines the lines a person watches,
harness.report.history's HistorySink keeps the finished run for `test --history`).

A stage adds the cells it settled; it never writes a file or prints a cell itself, so a new
output is a new sink, not an edit of the stages."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from harness.model.cell import Cell, Report
from harness.model.outcome import Outcome
from harness.report.store import ReportFiles


class Sink(Protocol):
    """What one output does with a run as it goes."""

    def begin(self, report: Report) -> None:
        """The run has begun: its report's header, and no cell yet."""

    def expect(self, cells: int, seconds: float) -> None:
        """`cells` more are coming from the GPUs, in about `seconds`."""

    def added(self, report: Report, cells: Sequence[Cell]) -> None:
        """`cells` were settled, and are the last of `report.cells`; called under a lock, so
        `report` holds still until it returns."""

    def end(self, report: Report) -> None:
        """The run is over, finished or not (`report.finished`): its report as it stays."""


class Results:
    """A run's report, and the sinks each of its changes goes to; `add` may be called from the
    threads of several GPUs at once."""

    def __init__(self, report: Report, sinks: Sequence[Sink]):
        self.report = report
        self.sinks = tuple(sinks)
        self._lock = threading.Lock()
        for sink in self.sinks:
            sink.begin(report)

    def add(self, cells: Sequence[Cell]) -> None:
        with self._lock:
            self.report.cells.extend(cells)
            for sink in self.sinks:
                sink.added(self.report, cells)

    def expect(self, cells: int, seconds: float) -> None:
        for sink in self.sinks:
            sink.expect(cells, seconds)

    def end(self) -> None:
        """Every sink told the run is over, each even when one before it raised (a full disk
        under one must not keep the others from their last word); the first error raised."""
        errors: list[BaseException] = []
        for sink in self.sinks:
            try:
                sink.end(self.report)
            except Exception as error:
                errors.append(error)
        if errors:
            raise errors[0]


@dataclass(frozen=True)
class RunResult:
    """What a run over one target gives its command: the report, its files, and how many builds
    were compiled and taken from the cache."""

    report: Report
    files: ReportFiles
    compiled: int
    cached: int

    @property
    def cells(self) -> list[Cell]:
        return self.report.cells

    @property
    def ok(self) -> bool:
        return not any(c.outcome in (Outcome.FAILED, Outcome.ERROR) for c in self.cells)
