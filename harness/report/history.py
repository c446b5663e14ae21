"""Every report's cells, kept in SQLite by commit, target, runner and device; and the verdict of a
cell's median against a baseline run: SAME within the runs' noise, FASTER or SLOWER beyond it.

Each row keeps its cell in the result model's JSON form, with the median and noise beside it as
numbers for the queries.
"""

from __future__ import annotations

import json
import math
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from harness.report.merge import ReportSet
from harness.result import Cell

# Run-to-run spread of the same binary on one H200 (docs/reports/h200 and the runs before it)
# was up to ~0.7 % on the small memory-bound cases, while the in-run noise of a 4096^3 GEMM is
# ~0.03 %: within-run noise alone would call a re-run a regression. Nothing within this floor
# is judged a change.
NOISE_FLOOR_PCT = 1.0
SIGMAS = 2.0

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


@dataclass(frozen=True)
class Verdict:
    cell: Cell
    baseline_us: float
    ratio: float  # current / baseline median: above 1 is slower
    tolerance_pct: float
    judgement: str  # SAME, FASTER, SLOWER

    @property
    def change_pct(self) -> float:
        return 100.0 * (self.ratio - 1.0)


class HistoryError(Exception):
    """A history database this harness cannot use; the message names the file."""


class History:
    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(path)
        self.db.execute("PRAGMA foreign_keys = ON")
        (version,) = self.db.execute("PRAGMA user_version").fetchone()
        tables = self.db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
        if tables and version != SCHEMA_VERSION:
            self.db.close()
            raise HistoryError(
                f"{path}: history of schema {version}, not {SCHEMA_VERSION}: move it aside "
                "(nothing in it is changed) and the next report starts a new one"
            )
        self.db.executescript(SCHEMA)
        self.db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

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
        """Each timed cell against the same cell (target, device, kernel, case) at `baseline`."""
        stored = {
            (target, device, classname, name): (median, noise)
            for target, device, classname, name, median, noise in self.db.execute(
                "SELECT r.target, r.device, c.classname, c.name, c.median_us, c.noise_pct "
                "FROM cells c JOIN runs r ON c.run_id = r.id "
                "WHERE r.commit_id = ? AND c.median_us IS NOT NULL",
                (baseline,),
            )
        }
        verdicts = []
        for cell in report_set.cells:
            key = (cell.target, cell.provenance.device or "none", cell.classname, cell.name)
            if cell.median_us is None or key not in stored:
                continue
            base_median, base_noise = stored[key]
            verdicts.append(judge(cell, base_median, base_noise or 0.0))
        return verdicts

    def trends(self) -> dict[tuple[str, str, str], list[tuple[str, float]]]:
        """(column, classname, name) -> [(commit, median_us)] in the order runs were stored."""
        trends: dict[tuple[str, str, str], list[tuple[str, float]]] = {}
        rows = self.db.execute(
            "SELECT r.target, r.runner, c.classname, c.name, r.commit_id, c.median_us "
            "FROM cells c JOIN runs r ON c.run_id = r.id "
            "WHERE c.median_us IS NOT NULL ORDER BY r.id"
        )
        for target, runner, classname, name, commit, median in rows:
            trends.setdefault((f"{target}@{runner}", classname, name), []).append(
                (commit[:10], median)
            )
        return trends


def judge(cell: Cell, base_median: float, base_noise_pct: float) -> Verdict:
    ratio = cell.median_us / base_median
    combined = SIGMAS * math.hypot(cell.timing.noise_pct, base_noise_pct)
    tolerance = max(NOISE_FLOOR_PCT, combined)
    if abs(ratio - 1.0) * 100.0 <= tolerance:
        judgement = "SAME"
    else:
        judgement = "SLOWER" if ratio > 1.0 else "FASTER"
    return Verdict(cell, base_median, ratio, tolerance, judgement)
