"""Every report's cells, kept in SQLite by commit, target, runner and device; and each timed
cell's verdict against the same cell of a baseline commit (harness.report.verdict).

Each run keeps its report whole, in the JSON it was read from (zlib-compressed), and each of its
cells gets a row of what the queries and the verdicts read: its outcome, median and noise as
numbers, its samples as packed doubles, a shared GPU's why, and a build's identity. So recording
a million cells serializes none of them again, and judging against them parses no JSON.
"""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import sys
import zlib
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from harness.model import codec
from harness.model.cell import CarriedFrom, Cell, Provenance, Report, column_of
from harness.model.codec import cell_from_json, possible_times
from harness.model.files import kind_of
from harness.model.outcome import CellKind
from harness.report.merge import ReportSet
from harness.report.verdict import (
    BaseTiming,
    BuildIdentity,
    Verdict,
    judge,
    kernel_identity,
    same_code,
)

# PRAGMA user_version: 1 kept each cell's properties as strings; 3 adds each run's driver and
# toolkit, which a history of 2 gets as unknown (NULL); 4 added each timed cell's samples and
# shared GPU as columns beside its JSON; 5 keeps each run's report JSON whole and no cell's JSON,
# the samples packed and each build's identity as columns. The cells of an older history keep
# their JSON in `cell`, and are read from it. 6 adds when each run was kept, and each case
# cell's verdict key and whether its verdict was carried (harness.pipeline.carrying): the runs
# of a history before 6 have no such keys, so no verdict is carried from them.
SCHEMA_VERSION = 6
RUNS = """
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY,
    commit_id TEXT NOT NULL,
    suite TEXT NOT NULL,
    target TEXT NOT NULL,
    runner TEXT NOT NULL,
    device TEXT NOT NULL,
    driver TEXT,
    toolkit TEXT,
    report BLOB,
    recorded TEXT,
    UNIQUE (commit_id, suite)
)"""
CELLS = """
CREATE TABLE IF NOT EXISTS {name} (
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    classname TEXT NOT NULL,
    name TEXT NOT NULL,
    outcome TEXT NOT NULL,
    median_us REAL,
    noise_pct REAL,
    samples_us BLOB,
    shared_gpu TEXT,
    code_identity TEXT,
    binary_sha256 TEXT,
    cell TEXT,
    verdict_key TEXT,
    carried INTEGER,
    PRIMARY KEY (run_id, classname, name)
)"""
VERDICT_KEYS = "CREATE INDEX IF NOT EXISTS cells_by_verdict_key ON cells (verdict_key)"
# what the cells of a history before 5 bring to the cells of 5: their JSON holds the rest
CARRIED = "run_id, classname, name, outcome, median_us, noise_pct, cell"


# (column, classname, name) -> [(commit, median_us)] in the order runs were stored
Trends = dict[tuple[str, str, str], list[tuple[str, float]]]


@dataclass(frozen=True)
class Comparison:
    """A run judged against a baseline: the verdicts, and what was not judged, and why."""

    verdicts: list[Verdict]
    remarks: list[str]


@dataclass(frozen=True)
class _Setting:
    """What a run ran with, as far as judging like with like goes."""

    device: str
    driver: str | None  # None: unknown (a run stored before histories kept it)
    toolkit: str | None

    def alike(self, other: _Setting) -> bool:
        """The same GPU model, driver and toolkit (where both say)."""
        return self.device == other.device and all(
            mine is None or theirs is None or mine == theirs
            for mine, theirs in ((self.driver, other.driver), (self.toolkit, other.toolkit))
        )

    def __str__(self) -> str:
        return (
            f"{self.device} (driver {self.driver or 'unknown'}, nvcc {self.toolkit or 'unknown'})"
        )


@dataclass(frozen=True)
class _Run:
    """A stored run of the baseline."""

    id: int
    target: str
    runner: str
    setting: _Setting


class HistoryError(Exception):
    """A history database this harness cannot use; the message names the file."""


def open_history(path: Path) -> tuple[History, str | None]:
    """The history at `path`; one this harness cannot read (corrupt, or of another schema) is
    moved aside whole and a fresh one started in its place, and the second value says so. A
    path that is something else than a file (a folder, a device, a pipe, a link) is refused
    as it is: only a history file is ever moved."""
    try:
        found = path.lstat()
    except FileNotFoundError:
        found = None
    except OSError as error:
        raise HistoryError(f"{path}: cannot be looked at ({error.strerror})") from error
    if found is not None and not stat.S_ISREG(found.st_mode):
        raise HistoryError(
            f"{path}: not a history file but {kind_of(found.st_mode)}; --db names the file "
            "the history is kept in"
        )
    try:
        return History(path), None
    except HistoryError as error:
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        kept = path.with_name(f"{path.name}.unreadable-{stamp}")
        try:
            os.replace(path, kept)
        except OSError as cannot:
            raise HistoryError(
                f"{error}; and it cannot be moved aside: {cannot.strerror}"
            ) from cannot
        return History(path), f"{error}; kept it as {kept} and started a fresh history"


def recent_reports(path: Path, target: str, count: int) -> list[bytes]:
    """The reports (compressed JSON, as kept) of the newest `count` runs of `target` in the
    history at `path`, read only: a history given to be read is never changed or moved."""
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as error:
        raise HistoryError(f"{path}: cannot be opened ({error})") from error
    try:
        rows = db.execute(
            "SELECT report FROM runs WHERE target = ? AND report IS NOT NULL "
            "ORDER BY id DESC LIMIT ?",
            (target, count),
        ).fetchall()
    except sqlite3.Error as error:
        raise HistoryError(f"{path}: not a history this harness can read ({error})") from error
    finally:
        db.close()
    return [row[0] for row in rows]


def passed_verdicts(path: Path, keys: Sequence[str], since: datetime) -> dict[str, CarriedFrom]:
    """For each of `keys` some passed case cell of the history at `path` has, reached (not
    carried) in a run kept at `since` or later: the newest such run. Read only."""
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as error:
        raise HistoryError(f"{path}: cannot be opened ({error})") from error
    found: dict[str, CarriedFrom] = {}
    try:
        (version,) = db.execute("PRAGMA user_version").fetchone()
        if version < SCHEMA_VERSION:
            raise HistoryError(
                f"{path}: a history of schema {version}, which keeps no verdict keys (6 does)"
            )
        unique = sorted(set(keys))
        for start in range(0, len(unique), _KEYS_A_QUERY):
            chunk = unique[start : start + _KEYS_A_QUERY]
            rows = db.execute(
                "SELECT cells.verdict_key, runs.commit_id, runs.runner, runs.recorded, runs.suite "
                "FROM cells JOIN runs ON runs.id = cells.run_id "
                f"WHERE cells.verdict_key IN ({', '.join('?' * len(chunk))}) "
                "AND cells.outcome = 'passed' AND cells.carried = 0 AND runs.recorded >= ? "
                "ORDER BY runs.recorded DESC, runs.id DESC",
                (*chunk, since.isoformat(timespec="seconds")),
            ).fetchall()
            for key, commit, runner, recorded, suite in rows:
                found.setdefault(key, CarriedFrom(commit, runner, recorded, suite))
    except sqlite3.Error as error:
        raise HistoryError(f"{path}: not a history this harness can read ({error})") from error
    finally:
        db.close()
    return found


def history_commits(path: Path) -> set[str]:
    """The commits the history at `path` keeps runs of, read only; none where it is not one."""
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error:
        return set()
    try:
        return {row[0] for row in db.execute("SELECT DISTINCT commit_id FROM runs")}
    except sqlite3.Error:
        return set()
    finally:
        db.close()


_KEYS_A_QUERY = 500  # within any SQLite's limit on a statement's parameters


class HistorySink:
    """A run's report kept in a history as the run ends (`test --history DB`), under the
    commit the run is of, as `report` would keep it: a sink of the run (harness.pipeline.results).
    An unfinished run is not kept: its missing cells would read as cells that never ran."""

    def __init__(self, path: Path, commit: str):
        self.path, self.commit = path, commit

    def begin(self, report: Report) -> None:
        pass

    def expect(self, cells: int, seconds: float) -> None:
        pass

    def added(self, report: Report, cells: Sequence[Cell]) -> None:
        pass  # kept whole, once: a history holds finished runs

    def end(self, report: Report) -> None:
        if not report.finished:
            return
        try:
            history = History(self.path)
        except HistoryError as error:  # the run stands; only its keeping failed: said
            print(f"history: {error}: this run is not kept there", file=sys.stderr)
            return
        try:
            history.record_report(report, self.commit)
        except sqlite3.DatabaseError as error:
            print(f"history: {self.path}: {error}: this run is not kept there", file=sys.stderr)
        finally:
            history.close()


class History:
    def __init__(self, path: Path):
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self.db = sqlite3.connect(path)
        except (OSError, sqlite3.Error) as error:
            raise HistoryError(f"{path}: cannot be opened ({error})") from error
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
        elif tables and version not in (2, 3, 4, 5, SCHEMA_VERSION):
            problem = f"{path}: a history of schema {version}, not {SCHEMA_VERSION}"
        if problem:
            self.db.close()
            raise HistoryError(problem)
        try:
            self.db.execute("PRAGMA foreign_keys = ON")
            with self.db:
                if tables and version < SCHEMA_VERSION:  # all of it, or none
                    self.db.execute("BEGIN")
                    _bring_up_to_date(self.db, version)
                self.db.execute(RUNS)
                self.db.execute(CELLS.format(name="cells"))
                self.db.execute(VERDICT_KEYS)
                self.db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        except sqlite3.DatabaseError as error:  # read-only, or locked by another writer
            self.db.close()
            raise HistoryError(f"{path}: cannot write the history ({error})") from error

    def close(self) -> None:
        self.db.close()

    def record(self, report_set: ReportSet, commit: str) -> None:
        """Store each suite of the set under `commit`, with the JSON it was read from;
        recording the same again replaces it."""
        with self.db:
            for report, report_json in zip(
                report_set.reports, report_set.compressed_json, strict=True
            ):
                self._record(report, report_json, commit)

    def record_report(self, report: Report, commit: str) -> None:
        """Store one run's report under `commit`, as `record` would store it read back."""
        text = json.dumps(codec.report_json(report)).encode()
        with self.db:
            self._record(report, zlib.compress(text, 1), commit)

    def _record(self, report: Report, report_json: bytes, commit: str) -> None:
        self.db.execute(
            "DELETE FROM runs WHERE commit_id = ? AND suite = ?", (commit, report.suite)
        )
        provenance = report.provenance
        run_id = self.db.execute(
            "INSERT INTO runs (commit_id, suite, target, runner, device, driver, toolkit, "
            "report, recorded) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                commit,
                report.suite,
                report.target,
                provenance.runner,
                provenance.device or "none",
                provenance.driver,
                provenance.toolkit,
                report_json,
                datetime.now(UTC).isoformat(timespec="seconds"),
            ),
        ).lastrowid
        self.db.executemany(
            "INSERT INTO cells (run_id, classname, name, outcome, median_us, noise_pct, "
            "samples_us, shared_gpu, code_identity, binary_sha256, verdict_key, carried) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [_row_of(run_id, cell) for cell in report.cells],
        )

    def commits(self) -> list[str]:
        return [row[0] for row in self.db.execute("SELECT DISTINCT commit_id FROM runs")]

    def resolve(self, ref: str) -> str | None:
        """A stored commit equal to `ref`, or the only one that starts with it."""
        matches = [c for c in self.commits() if c == ref] or [
            c for c in self.commits() if c.startswith(ref)
        ]
        return matches[0] if len(matches) == 1 else None

    def compare(self, report_set: ReportSet, baseline: str) -> Comparison:
        """Each timed cell against the same cell at `baseline`, run alike (the same target, GPU
        model, driver and toolkit), with whether the kernel's code is the baseline's
        (verdict.same_code). A report the baseline has no alike run for is named, not judged."""
        runs = [
            _Run(run_id, target, runner, _Setting(device, driver, toolkit))
            for run_id, target, runner, device, driver, toolkit in self.db.execute(
                "SELECT id, target, runner, device, driver, toolkit FROM runs WHERE commit_id = ?",
                (baseline,),
            )
        ]
        comparison = Comparison([], [])
        loaded: dict[tuple[int, ...], _Stored] = {}  # the baseline's cells, by the runs read
        for report in report_set.reports:
            here = report.provenance
            setting = _Setting(here.device or "none", here.driver, here.toolkit)
            of_target = [run for run in runs if run.target == report.target]
            alike = [run for run in of_target if run.setting.alike(setting)]
            if not alike:
                if of_target:
                    ran = "; ".join(sorted({str(run.setting) for run in of_target}))
                    comparison.remarks.append(
                        f"{report.target}: the baseline {baseline[:10]} ran on {ran}; this run "
                        f"on {setting}: not judged"
                    )
                elif any(cell.timing for cell in report.cells):
                    comparison.remarks.append(
                        f"{report.target}: the baseline {baseline[:10]} has no run of this "
                        "target: not judged"
                    )
                continue
            key = tuple(run.id for run in alike)
            if key not in loaded:  # once, however many of this run's reports it judges
                loaded[key] = self._stored(alike, baseline)
            _judge_alike(report, loaded[key], baseline, comparison)
        return comparison

    def _stored(self, runs: list[_Run], baseline: str) -> _Stored:
        """The timed cells and builds of `runs` (a later run's where two have one), and how many
        timed cells could not be read back for an impossible time."""
        stored = _Stored({}, {}, 0)
        for run in runs:
            provenance = Provenance(runner=run.runner, commit=baseline, device=run.setting.device)
            rows = self.db.execute(
                "SELECT classname, name, median_us, samples_us, shared_gpu, code_identity, "
                "binary_sha256, cell FROM cells WHERE run_id = ? "
                "AND (median_us IS NOT NULL OR name LIKE 'compile[%' OR name LIKE 'compile(%')",
                (run.id,),
            )
            for classname, name, median, samples, shared, identity, digest, record in rows:
                if record is not None:  # stored before schema 5: the cell is in its JSON
                    _read_whole(record, run.target, provenance, stored)
                elif median is None:  # a compile cell
                    stored.builds.setdefault(classname, {})[name] = BuildIdentity(identity, digest)
                else:
                    try:
                        stored.timings[(classname, name)] = _timing_of(median, samples, shared)
                    except ValueError:  # an impossible time stored before they were refused
                        stored.impossible += 1
        return stored

    def trends(self) -> Trends:
        """Every timed cell's medians over the stored runs, by the cell's column (Cell.column),
        classname and name."""
        trends: Trends = {}
        runs = {
            run_id: (column_of(target, runner), commit[:10])
            for run_id, target, runner, commit in self.db.execute(
                "SELECT id, target, runner, commit_id FROM runs"
            )
        }
        rows = self.db.execute(
            "SELECT run_id, classname, name, median_us FROM cells "
            "WHERE median_us IS NOT NULL ORDER BY run_id"
        )
        for run_id, classname, name, median in rows:  # a run at a time: a column each
            column, commit = runs[run_id]
            trends.setdefault((column, classname, name), []).append((commit, median))
        return trends


@dataclass
class _Stored:
    """A baseline's cells as read back for judging."""

    timings: dict[tuple[str, str], BaseTiming]  # by (classname, name)
    # the baseline's compile cells' identities, by classname and cell name
    builds: dict[str, dict[str, BuildIdentity | None]]
    impossible: int  # cells left out for an impossible time


def _bring_up_to_date(db: sqlite3.Connection, version: int) -> None:
    """A history of an earlier schema made one of this, nothing lost: the runs of 2 get their
    driver and toolkit as unknown, the cells before 5 keep their JSON, from which they are
    read, and the runs and cells before 6 have no time kept and no verdict key."""
    db.execute("ALTER TABLE runs ADD COLUMN recorded TEXT")
    if version == 5:
        db.execute("ALTER TABLE cells ADD COLUMN verdict_key TEXT")
        db.execute("ALTER TABLE cells ADD COLUMN carried INTEGER")
        return
    if version == 2:
        db.execute("ALTER TABLE runs ADD COLUMN driver TEXT")
        db.execute("ALTER TABLE runs ADD COLUMN toolkit TEXT")
    db.execute("ALTER TABLE runs ADD COLUMN report BLOB")
    db.execute(CELLS.format(name="cells_before"))
    db.execute(f"INSERT INTO cells_before ({CARRIED}) SELECT {CARRIED} FROM cells")
    db.execute("DROP TABLE cells")
    db.execute("ALTER TABLE cells_before RENAME TO cells")


def _row_of(run_id: int | None, cell: Cell) -> tuple[object, ...]:
    """A cell's row: what judging and trends read of it (its JSON is its run's)."""
    timing, facts = cell.timing, cell.compile
    if timing is None:
        times: tuple[object, ...] = (None, None, None, None)
    else:
        times = (timing.median_us, timing.noise_pct, _packed(timing.samples_us), timing.shared_gpu)
    built = (facts.code_identity, facts.binary_sha256) if facts else (None, None)
    carried = (cell.verdict_key, int(cell.carried_from is not None))
    return (run_id, cell.classname, cell.name, cell.outcome.value, *times, *built, *carried)


def _packed(samples: tuple[float, ...]) -> bytes:
    """Samples as little-endian doubles: a million cells' are packed and read back in C."""
    values = array("d", samples)
    if sys.byteorder == "big":
        values.byteswap()
    return values.tobytes()


def _timing_of(median: float, samples: object, shared: str | None) -> BaseTiming:
    """A timed cell's baseline timing from its columns; ValueError where a time in them is not
    one a GPU can take (NaN, infinite, zero or negative), or they are not packed doubles."""
    if not isinstance(samples, bytes) or len(samples) % 8:
        raise ValueError(f"samples are not packed doubles: {samples!r:.40}")
    values = array("d", samples)
    if sys.byteorder == "big":
        values.byteswap()
    times = (median, *values)
    if len(times) < 2 or not possible_times(times):
        raise ValueError(f"an impossible time among {times[:3]}")
    return BaseTiming(float(median), tuple(values), shared)


def _read_whole(record: str, target: str, provenance: Provenance, stored: _Stored) -> None:
    """A cell stored before schema 5, read from its JSON into `stored`."""
    try:
        cell = cell_from_json(json.loads(record), target, provenance)
    except ValueError:  # an impossible time stored before they were refused
        stored.impossible += 1
        return
    key = (cell.classname, cell.name)
    if cell.timing is not None:
        stored.timings[key] = BaseTiming.of(cell.timing)
    if cell.kind is CellKind.COMPILE:
        stored.builds.setdefault(cell.classname, {})[cell.name] = BuildIdentity.of(cell.compile)


def _judge_alike(report: Report, stored: _Stored, baseline: str, comparison: Comparison) -> None:
    if stored.impossible:
        comparison.remarks.append(
            f"{report.target}: {stored.impossible} cell(s) of the baseline {baseline[:10]} have "
            "impossible times (NaN, infinite, zero or negative): not judged against"
        )
    built_now: dict[str, dict[str, BuildIdentity | None]] = {}
    for c in report.cells:
        if c.kind is CellKind.COMPILE:
            built_now.setdefault(c.classname, {})[c.name] = BuildIdentity.of(c.compile)
    for cell in report.cells:
        base = stored.timings.get((cell.classname, cell.name))
        if cell.timing is None or base is None:
            continue
        same = same_code(
            kernel_identity(built_now.get(cell.classname, {})),
            kernel_identity(stored.builds.get(cell.classname, {})),
        )
        comparison.verdicts.append(judge(cell, base, same))
