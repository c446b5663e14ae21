"""A report's two files on disk, JSON and JUnit XML, and every file the harness publishes: each
written whole or not at all.

The JSON is `codec.report_json()`, numbers as numbers: what the harness itself reads back. The XML
is rendered from the same report (harness.report.junit), for the dashboards that read JUnit; the
JSON names the XML's bytes by their SHA-256 (`junit_sha256`), and its own cells' names and
outcomes by theirs (`outcomes_sha256`): a reader finding those very XML bytes beside cells of
that digest knows the two agree without parsing the XML (harness.report.merge), and a JSON
edited since (a cell dropped, an outcome changed) is caught by the second.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import tempfile
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness import waiting
from harness.model.cell import Cell, Report
from harness.model.codec import report_json
from harness.report import junit

WRITE_INTERVAL_S = 0.5  # a live report's longest lag behind its last cell
XML_DIGEST = "junit_sha256"  # the JSON's name for its XML's SHA-256
OUTCOMES_DIGEST = "outcomes_sha256"  # and for its cells' names and outcomes'


@dataclass(frozen=True)
class ReportFiles:
    xml: Path
    json: Path


def report_files(reports_dir: Path, stem: str) -> ReportFiles:
    return ReportFiles(reports_dir / f"{stem}.xml", reports_dir / f"{stem}.json")


def write(files: ReportFiles, report: Report) -> None:
    """Write both files atomically, so a crash mid-run leaves the last complete report."""
    files.xml.parent.mkdir(parents=True, exist_ok=True)
    xml = junit.render([report])
    replace(files.xml, xml)
    record = report_json(report)
    record[XML_DIGEST] = hashlib.sha256(xml.encode()).hexdigest()
    record[OUTCOMES_DIGEST] = outcomes_digest(report.cells)
    replace(files.json, json.dumps(record, indent=1) + "\n")


def outcomes_digest(cells: Iterable[Cell]) -> str:
    """The SHA-256 of each cell's classname, name and outcome, in order: what the XML says of
    the cells, taken from the JSON's side."""
    lines = "".join(f"{c.classname}\0{c.name}\0{c.outcome.value}\n" for c in cells)
    return hashlib.sha256(lines.encode()).hexdigest()


class LiveReport:
    """A report's files kept on disk while its cells come in (a sink of the pipeline,
    harness.pipeline.results), written by a thread of its own so that the run never waits for
    the disk: the files are at most `interval_s` behind the last cell, and `end` leaves them
    complete.

    Writing is paced because rendering a report holds the interpreter's lock for its length (a
    full run's samples make megabytes of JSON): written after every cell, it would stall the
    threads that feed the GPU once per cell."""

    def __init__(self, files: ReportFiles, interval_s: float = WRITE_INTERVAL_S):
        self.files, self.interval_s = files, interval_s
        self._latest: Report | None = None
        self._dirty = threading.Event()
        self._closing = threading.Event()
        self._error: OSError | None = None
        self._thread = threading.Thread(target=self._keep_written, daemon=True)

    def begin(self, report: Report) -> None:
        """Written at once, before any cell: a run killed from now on leaves its own report,
        unfinished, never the last run's."""
        write(self.files, report)
        self._thread.start()

    def expect(self, cells: int, seconds: float) -> None:
        pass  # the files say what is done, not what is to come

    def added(self, report: Report, cells: Sequence[Cell]) -> None:
        self._latest = dataclasses.replace(report, cells=list(report.cells))
        self._dirty.set()

    def _keep_written(self) -> None:
        while not self._closing.is_set():
            self._dirty.wait()
            self._dirty.clear()
            latest = self._latest
            if latest is not None:
                try:
                    write(self.files, latest)
                except OSError as error:  # a full disk: raised from end, in the run's thread
                    self._error = error
            self._closing.wait(self.interval_s)  # the cells of the pause go in the next write

    def end(self, report: Report) -> None:
        self._closing.set()
        self._dirty.set()
        waiting.join([self._thread])
        if self._error is not None:
            raise self._error
        write(self.files, report)


def replace(path: Path, text: str | Iterable[str]) -> None:
    """Write `text` (or its pieces, one after another) to a new file of a unique name beside
    `path`, then rename it over `path`:
    two runs writing the same report never share a scratch file, and a link planted at a
    scratch name is never followed (mkstemp creates the file, O_EXCL)."""
    handle, scratch = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(handle, 0o666 & ~umask)  # as open() would make it, not mkstemp's 0600
        with os.fdopen(handle, "w", encoding="utf-8") as file:
            if isinstance(text, str):
                file.write(text)
            else:
                file.writelines(text)
        os.replace(scratch, path)
    except BaseException:
        Path(scratch).unlink(missing_ok=True)
        raise
