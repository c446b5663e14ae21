"""`test --shard i/N`: a target's kernels split across N runs (GPU jobs), each kernel whole in
one of them (its compile cells and cases share its build and worker), balanced by expected time.

Every shard plans all N alone, so every shard must weigh the kernels alike: by the times of
`--times` (reports' JSON, history databases, or JSON objects of seconds by `chapter.kernel` or
`chapter.kernel::case`), else of this target's last runs in the reports folder's history, else
of its last full report there, else by each case's size (its spec's work()). A case's time
is the median over the runs that have it: one run's host work, measured while a whole target's
cases contend for the host, is off by up to four times for a kernel, and a median of runs is
not. Each shard's report records the SHA-256 of the whole plan, and `report` names shards of one
run that planned differently, a shard missing and a cell run twice.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import statistics
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.model.cell import Shard
from harness.model.codec import report_from_json
from harness.model.discovery import Kernel
from harness.model.errors import ReportError, UsageError
from harness.model.files import Unreadable, open_regular
from harness.model.matrix import MOST_SHARDS
from harness.model.outcome import CellKind
from harness.report.history import HistoryError, recent_reports
from harness.run.schedule import balanced_parts, estimate

# The runs of a history that weigh a case: the newest, so a kernel's times follow its code.
HISTORY_RUNS = 5
TIMES_MOST_BYTES = 256 << 20  # a JSON of times: a full run's report is a few MB
SQLITE_MAGIC = b"SQLite format 3\0"


class ShardError(UsageError):
    """A --shard or --times that cannot be used; the message names it."""


@dataclass(frozen=True)
class ShardRequest:
    """`--shard i/N`, and where the kernels' times come from."""

    index: int
    count: int
    times: tuple[Path, ...] = ()  # --times; none: the reports folder's history or last report

    @classmethod
    def parse(cls, text: str, times: tuple[Path, ...] = ()) -> ShardRequest:
        match = re.fullmatch(r"\s*([0-9]+)\s*/\s*([0-9]+)\s*", text)
        if not match or not 1 <= int(match.group(1)) <= int(match.group(2)):
            raise ShardError(f"--shard {text!r}: expected i/N with 1 <= i <= N, like 2/4")
        if int(match.group(2)) > MOST_SHARDS:
            raise ShardError(
                f"--shard {text!r}: at most {MOST_SHARDS} shards, as in matrix.yaml (GitHub "
                "Actions runs at most that many jobs of one matrix)"
            )
        return cls(int(match.group(1)), int(match.group(2)), times)


@dataclass(frozen=True)
class Times:
    """Seconds by `chapter.kernel` and by `chapter.kernel::case`, and what they are of."""

    seconds: dict[str, float]
    said: str  # "median of 3 runs: reports/history.sqlite", "case sizes"


def times_of(paths: Sequence[Path], target: str) -> Times:
    """For each kernel and case, the median of its times over the runs of `paths` that have it
    (a report, a JSON object of seconds, or a history's last HISTORY_RUNS runs of `target`);
    ShardError naming a file that is none of them."""
    seen: dict[str, list[float]] = {}
    runs = 0
    for path in paths:
        for run in _runs_of(path, target):
            runs += 1
            for key, seconds in run.items():
                seen.setdefault(key, []).append(seconds)
    if not runs:
        return Times({}, "case sizes")
    named = ", ".join(str(path) for path in paths)
    said = f"median of {runs} runs: {named}" if runs > 1 else f"times of {named}"
    return Times({key: statistics.median(values) for key, values in seen.items()}, said)


def default_sources(reports: Path, target: str) -> tuple[Path, ...]:
    """What weighs the shards where no --times is given: the history in `reports` where it
    keeps runs of `target`, else the target's last full report there, else nothing."""
    history = reports / "history.sqlite"
    if history.is_file():
        try:
            if recent_reports(history, target, 1):
                return (history,)
        except HistoryError:
            pass  # an unreadable history weighs nothing; the report folder's report may
    last = reports / f"junit-{target}.json"
    return (last,) if last.is_file() else ()


def _runs_of(path: Path, target: str) -> list[dict[str, float]]:
    try:
        with open_regular(path) as opened:
            text = opened.read(len(SQLITE_MAGIC))
            if text == SQLITE_MAGIC:  # a history: SQLite reads what it needs of it
                return _history_runs(path, target)
            text += opened.read(TIMES_MOST_BYTES + 1 - len(text))
    except Unreadable as error:
        raise ShardError(f"--times {error}") from error
    except OSError as error:
        raise ShardError(f"--times {path}: cannot be read ({error.strerror})") from error
    if len(text) > TIMES_MOST_BYTES:
        raise ShardError(f"--times {path}: larger than {TIMES_MOST_BYTES >> 20} MiB")
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as error:
        raise ShardError(f"--times {path}: cannot be read as JSON ({error})") from error
    if isinstance(data, dict) and "cells" in data and "schema_version" in data:
        return [_case_times(data, path)]
    if isinstance(data, dict) and all(
        isinstance(key, str) and isinstance(value, int | float) and not isinstance(value, bool)
        for key, value in data.items()
    ):
        for key, value in data.items():
            if not math.isfinite(value) or value < 0:
                raise ShardError(f"--times {path}: {key!r} is {value!r} s, not a time")
        return [{key: float(value) for key, value in data.items()}]
    raise ShardError(
        f"--times {path}: neither a report's JSON, a history database, nor an object of seconds "
        'by "chapter.kernel" or "chapter.kernel::case"'
    )


def _case_times(data: object, path: Path) -> dict[str, float]:
    """Each case's time in one report: its turn on the GPU and its host work (setup,
    reference), since a shard's machine does both; the turns alone left one shard of two 60 %
    longer on an H200."""
    try:
        report = report_from_json(data, path)
    except ReportError as error:
        raise ShardError(f"--times {path}: {error}") from error
    return {
        f"{cell.classname}::{cell.case}": cell.seconds
        + (cell.stages.setup_s + cell.stages.reference_s if cell.stages else 0.0)
        for cell in report.cells
        if cell.kind is CellKind.CASE and cell.carried_from is None  # a carried cell took none
    }


def _history_runs(path: Path, target: str) -> list[dict[str, float]]:
    """The case times of the newest HISTORY_RUNS runs of `target` that `path` keeps."""
    try:
        kept = recent_reports(path, target, HISTORY_RUNS)
    except HistoryError as error:
        raise ShardError(f"--times {error}") from error
    runs = []
    for report in kept:
        try:
            data = json.loads(zlib.decompress(report))
        except (zlib.error, TypeError, ValueError) as error:
            raise ShardError(f"--times {path}: a run's report cannot be read ({error})") from error
        runs.append(_case_times(data, path))
    return runs


def weights_of(
    kernels: list[Kernel], broken: list[str], times: Mapping[str, float]
) -> dict[str, float]:
    """Each kernel's expected seconds, by classname: its own time where `times` has it, else
    the sum of its cases' (each from `times`, else from its size); a kernel whose spec did not
    load (`broken`) weighs nothing."""
    weights = dict.fromkeys(broken, 0.0)
    for kernel in kernels:
        if kernel.classname in times:
            weights[kernel.classname] = times[kernel.classname]
            continue
        total = 0.0
        for case in kernel.declared.cases:
            seen = times.get(f"{kernel.classname}::{case.name}")
            guess = estimate(case.work)
            total += seen if seen is not None else guess.host_s + guess.turn_s
        weights[kernel.classname] = total
    return weights


def weighed_by(times: Times, kernels: list[Kernel]) -> str:
    """What a plan's weights came from: the times' source, or case sizes where the times name
    none of `kernels` (times of another project)."""
    keys = {k.classname for k in kernels}
    keys |= {f"{k.classname}::{case.name}" for k in kernels for case in k.declared.cases}
    if times.seconds and keys.isdisjoint(times.seconds):
        return f"case sizes ({times.said} names none of these kernels)"
    return times.said


@dataclass(frozen=True)
class Plan:
    """Every shard's kernels, by classname, and this run's shard of them."""

    shards: list[list[str]]
    shard: Shard

    def has(self, classname: str) -> bool:
        return classname in self.shards[self.shard.index - 1]

    def load(self, weights: Mapping[str, float]) -> list[float]:
        """Each shard's expected seconds."""
        return [sum(weights[name] for name in names) for names in self.shards]


def plan(request: ShardRequest, weights: Mapping[str, float], source: str) -> Plan:
    """The kernels of `weights` in request.count shards, longest first onto the least loaded
    (ties by name, then to the lower shard): the same plan from the same weights anywhere."""
    shards = balanced_parts(sorted(weights), weights.__getitem__, request.count)
    digest = hashlib.sha256(json.dumps(shards).encode()).hexdigest()
    return Plan(shards, Shard(request.index, request.count, digest, source))
