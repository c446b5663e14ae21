"""Every report's cells, kept in SQLite by commit, target, runner and device; and each timed
cell's verdict against the same cell of a baseline commit (harness.report.verdict).

Each row keeps its cell in the result model's JSON form, with the median and noise beside it as
numbers for the queries.
"""

from __future__ import annotations

import json
import os
import sqlite3
from datetime import datetime, timezone
from pathlib import Path

from harness.model.result import Cell, CellKind, Provenance, column_of
from harness.report.merge import ReportSet
from harness.report.verdict import Verdict, judge, same_code

SCHEMA_VERSION = 2  # PRAGMA user_version: 1 kept each cell's properties as strings
SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY,
    commit_id TEXT NOT NULL,
    suite TEXT NOT NULL,
    target TEXT NOT NULL,
    runner TEXT NOT NULL,
    device TEXT NOT NULL,
    UNIQUE (commit_id, suite)
);
CREATE TABLE IF NOT EXISTS cells (
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    classname TEXT NOT NULL,
    name TEXT NOT NULL,
    outcome TEXT NOT NULL,
    median_us REAL,
    noise_pct REAL,
    cell TEXT NOT NULL,
    PRIMARY KEY (run_id, classname, name)
);
"""


# (column, classname, name) -> [(commit, median_us)] in the order runs were stored
Trends = dict[tuple[str, str, str], list[tuple[str, float]]]


class HistoryError(Exception):
    """A history database this harness cannot use; the message names the file."""


def open_history(path: Path) -> tuple[History, str | None]:
    """The history at `path`; one this harness cannot read (corrupt, or of another schema) is
    moved aside whole and a fresh one started in its place, and the second value says so."""
    try:
        return History(path), None
    except HistoryError as error:
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        kept = path.with_name(f"{path.name}.unreadable-{stamp}")
        try:
            os.replace(path, kept)
        except OSError as cannot:
            raise HistoryError(
                f"{error}; and it cannot be moved aside: {cannot.strerror}"
            ) from cannot
        return History(path), f"{error}; kept it as {kept} and started a fresh history"


class History:
    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(path)
        try:
            (version,) = self.db.execute("PRAGMA user_version").fetchone()
            tables = self.db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
            (health,) = self.db.execute("PRAGMA quick_check").fetchone()
        except sqlite3.DatabaseError as error:  # not an SQLite file, or a damaged one
            self.db.close()
            raise HistoryError(f"{path}: not a readable history ({error})") from error
        problem = ""
        if health != "ok":  # a damaged page: what it returns cannot be trusted
            problem = f"{path}: a damaged history (quick_check: {health})"
        elif tables and version != SCHEMA_VERSION:
            problem = f"{path}: a history of schema {version}, not {SCHEMA_VERSION}"
        if problem:
            self.db.close()
            raise HistoryError(problem)
        try:
            self.db.execute("PRAGMA foreign_keys = ON")
            self.db.executescript(SCHEMA)
            self.db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        except sqlite3.DatabaseError as error:  # read-only, or locked by another writer
            self.db.close()
            raise HistoryError(f"{path}: cannot write the history ({error})") from error

    def close(self) -> None:
        self.db.close()

    def record(self, report_set: ReportSet, commit: str) -> None:
        """Store each suite of the set under `commit`; recording the same again replaces it."""
        with self.db:
            for report in report_set.reports:
                cells = report.cells
                self.db.execute(
                    "DELETE FROM runs WHERE commit_id = ? AND suite = ?", (commit, report.suite)
                )
                run_id = self.db.execute(
                    "INSERT INTO runs (commit_id, suite, target, runner, device) "
                    "VALUES (?, ?, ?, ?, ?)",
                    (
                        commit,
                        report.suite,
                        report.target,
                        report.provenance.runner,
                        report.provenance.device or "none",
                    ),
                ).lastrowid
                self.db.executemany(
                    "INSERT INTO cells VALUES (?, ?, ?, ?, ?, ?, ?)",
                    [
                        (
                            run_id,
                            c.classname,
                            c.name,
                            c.outcome.value,
                            c.median_us,
                            c.timing.noise_pct if c.timing else None,
                            json.dumps(c.to_json()),
                        )
                        for c in cells
                    ],
                )

    def commits(self) -> list[str]:
        return [row[0] for row in self.db.execute("SELECT DISTINCT commit_id FROM runs")]

    def resolve(self, ref: str) -> str | None:
        """A stored commit equal to `ref`, or the only one that starts with it."""
        matches = [c for c in self.commits() if c == ref] or [
            c for c in self.commits() if c.startswith(ref)
        ]
        return matches[0] if len(matches) == 1 else None

    def compare(self, report_set: ReportSet, baseline: str) -> list[Verdict]:
        """Each timed cell against the same cell (target, device, kernel, case) at `baseline`,
        with whether the kernel's code is the baseline's (verdict.same_code)."""
        stored: dict[tuple[str, str, str, str], Cell] = {}
        builds: dict[tuple[str, str, str], Cell] = {}  # the baseline's compile cells
        for target, runner, device, record in self.db.execute(
            "SELECT r.target, r.runner, r.device, c.cell FROM cells c "
            "JOIN runs r ON c.run_id = r.id WHERE r.commit_id = ?",
            (baseline,),
        ):
            where = Provenance(runner=runner, commit=baseline, device=device)
            cell = Cell.from_json(json.loads(record), target, where)
            stored[(target, device, cell.classname, cell.name)] = cell
            if cell.kind is CellKind.COMPILE:
                builds[(target, device, cell.classname)] = cell
        cells = report_set.cells
        # this run's builds: what each of its run cells ran
        built_now = {
            (c.target, c.runner, c.classname): c.compile
            for c in cells
            if c.kind is CellKind.COMPILE
        }
        verdicts = []
        for cell in cells:
            device = cell.provenance.device or "none"
            base = stored.get((cell.target, device, cell.classname, cell.name))
            if cell.timing is None or base is None or base.timing is None:
                continue
            built = builds.get((cell.target, device, cell.classname))
            now = built_now.get((cell.target, cell.runner, cell.classname))
            verdicts.append(judge(cell, base, same_code(now, built.compile if built else None)))
        return verdicts

    def trends(self) -> Trends:
        """Every timed cell's medians over the stored runs, by the cell's column (Cell.column),
        classname and name."""
        trends: Trends = {}
        rows = self.db.execute(
            "SELECT r.target, r.runner, c.classname, c.name, r.commit_id, c.median_us "
            "FROM cells c JOIN runs r ON c.run_id = r.id "
            "WHERE c.median_us IS NOT NULL ORDER BY r.id"
        )
        for target, runner, classname, name, commit, median in rows:
            trends.setdefault((column_of(target, runner), classname, name), []).append(
                (commit[:10], median)
            )
        return trends
