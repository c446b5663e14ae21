"""From per-target reports to what people read: merged.xml, summary.md, dashboard.html, and the
history they are compared against; and the gate, the exit code's say on performance.

Only a same-GPU A/B (`Cell.ab`, written by `python -m harness ab`) can fail the gate: two runs on
two machines differ by what the machines do, so a cross-run verdict against the history is shown,
never failing, and a cross-run SLOWER of changed code without a measured A/B is named as
unconfirmed, with why."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from harness.model.cell import Judgement
from harness.model.matrix import DevicePeaks
from harness.model.outcome import CellKind, Outcome, SkipReason
from harness.report import store
from harness.report.dashboard import render_dashboard
from harness.report.history import HistoryError, Trends, open_history
from harness.report.merge import ReportSet, load_reports, write_merged_xml
from harness.report.status import Status, status_of
from harness.report.summary import compiled_only, describe_ab, render_summary
from harness.report.verdict import Verdict, unconfirmed


@dataclass(frozen=True)
class PublishOptions:
    reports: list[Path]  # JUnit XML files, each with its JSON beside it
    expected_targets: list[str]
    out: Path
    database: Path
    commit: str
    baseline: str | None = None
    max_slowdown_pct: float | None = None  # an A/B SLOWER beyond this fails the exit code
    strict: bool = False  # a kernel that never ran fails the exit code
    # A report's file -> the target of the artifact (CI job) it came in: it must be that one's.
    artifact_targets: dict[Path, str] = field(default_factory=dict)
    device_peaks: dict[str, DevicePeaks] = field(default_factory=dict)  # for the rooflines


@dataclass
class Published:
    report_set: ReportSet
    verdicts: list[Verdict]
    files: list[Path]
    failures: list[str] = field(default_factory=list)  # why the exit code is not 0
    remarks: list[str] = field(default_factory=list)  # what the summary warns of, not failing
    status: Status | None = None  # the verdict the summary and the page show


def publish(options: PublishOptions) -> Published:
    report_set = load_reports(options.reports, options.expected_targets, options.artifact_targets)
    unfinished = [
        f"{source}: the run did not finish (killed, or still running): its {len(report.cells)} "
        "cells are merged, and the cells it never reached are missing"
        for report, source in zip(report_set.reports, report_set.sources, strict=True)
        if not report.finished
    ]
    failures: list[str] = [*report_set.problems, *unfinished]
    if not options.reports:
        failures.append("no report to publish: no files were given, and none was found")
    out = options.out
    out.mkdir(parents=True, exist_ok=True)  # before the history: a run that cannot publish
    judged = _against_history(report_set, options)  # records nothing
    verdicts = judged.verdicts
    remarks = [*report_set.remarks, *judged.remarks, *_unconfirmed(verdicts)]
    if options.max_slowdown_pct is not None:
        gate = _gate(report_set, options.max_slowdown_pct)
        failures += gate.failures
        remarks += gate.remarks
    if options.strict:
        inspected = _inspected_only(report_set)
        failures += [
            f"{kernel} never ran on any target"
            for kernel in report_set.never_ran()
            if kernel not in inspected
        ]
    status = status_of(report_set, failures)
    # what else the verdict says NOT OK for, each said where `report` lists why it fails
    failures += [f"target {t} has no report" for t in report_set.missing_targets]
    failures += report_set.shard_problems
    broken = [c for c in report_set.cells if c.outcome in (Outcome.FAILED, Outcome.ERROR)]
    if broken:
        failures.append(f"{len(broken)} cell(s) failed or errored (summary.md lists them)")
    write_merged_xml(report_set, out / "merged.xml")
    compiled_columns = compiled_only(report_set.reports)  # once, for the summary and the page
    summary = render_summary(
        report_set,
        verdicts,
        [*remarks, *unfinished],
        options.expected_targets,
        compiled_columns,
        status,
    )
    store.replace(out / "summary.md", summary)
    page = render_dashboard(
        report_set, judged.trends, verdicts, options.device_peaks, compiled_columns, status
    )
    store.replace(out / "dashboard.html", page)
    files = [out / "merged.xml", out / "summary.md", out / "dashboard.html"]
    return Published(report_set, verdicts, files, failures, remarks, status)


@dataclass(frozen=True)
class _Gate:
    failures: list[str]  # A/B SLOWERs beyond the limit
    remarks: list[str]  # A/B SLOWERs beyond it whose code is the base's all the same


def _gate(report_set: ReportSet, limit_pct: float) -> _Gate:
    """Each case whose same-GPU A/B judged it SLOWER by more than `limit_pct`: a failure naming
    the cell, its runner, the A/B's ratio and interval and the base commit. One whose code
    identity is the base's (what the A/B would call IDENTICAL) is the machine's, never a
    failure."""
    gate = _Gate([], [])
    for report in report_set.reports:
        # a kernel's builds (one per set of case macros): the base's code of a case is the
        # head's when one of them has its identity
        identities: dict[str, set[str]] = {}
        for cell in report.cells:
            if cell.kind is CellKind.COMPILE and cell.compile and cell.compile.code_identity:
                identities.setdefault(cell.classname, set()).add(cell.compile.code_identity)
        for cell in report.cells:
            ab = cell.ab
            if ab is None or ab.judgement is not Judgement.SLOWER:
                continue
            change = ab.change_pct
            if change is None or change <= limit_pct:
                continue
            where = f"{cell.classname} {cell.name} on {cell.runner}"
            said = f"the A/B against {ab.base_commit[:10]} on one GPU: {describe_ab(ab)}"
            if ab.base_code_identity in identities.get(cell.classname, set()):
                gate.remarks.append(
                    f"{where}: {change:.1f} % slower in {said}; but its code identity is the "
                    "base's: the machine, not the code, and no failure"
                )
            else:
                gate.failures.append(
                    f"{where}: {change:.1f} % slower in {said} (limit {limit_pct:g} %)"
                )
    return gate


def _unconfirmed(verdicts: list[Verdict]) -> list[str]:
    """Cross-run SLOWERs of changed code that no measured A/B confirms or refutes, and why."""
    return [
        f"unconfirmed: {v.cell.classname} {v.cell.name} on {v.cell.runner}: SLOWER than the "
        f"baseline across runs (ratio {v.ratio:.3f}, 95 % interval {v.low:.3f}-{v.high:.3f}), "
        f"and {why}; a cross-run verdict never fails the gate"
        for v in verdicts
        if (why := unconfirmed(v))
    ]


def _inspected_only(report_set: ReportSet) -> set[str]:
    """Kernels that could run only on targets no runner of these reports has a GPU for (every
    run cell skipped target-unsupported, or device-unsupported in a compiled-only column): they
    never ran, and the summary says so, but no runner of this fleet could have run them."""
    columns = compiled_only(report_set.reports)
    could_run: dict[str, bool] = {}
    for cell in report_set.cells:
        if cell.kind is not CellKind.CASE:
            continue
        unrunnable = cell.skip_reason is SkipReason.TARGET_UNSUPPORTED or (
            cell.skip_reason is SkipReason.DEVICE_UNSUPPORTED and cell.column in columns
        )
        could_run[cell.classname] = could_run.get(cell.classname, False) or not unrunnable
    return {kernel for kernel, could in could_run.items() if not could}


@dataclass(frozen=True)
class _Judged:
    """What the history says of this run: verdicts against the baseline, the stored trends, and
    what the reader must know of it (a baseline that is not stored, a history started anew)."""

    verdicts: list[Verdict]
    trends: Trends
    remarks: list[str]


def _against_history(report_set: ReportSet, options: PublishOptions) -> _Judged:
    """The verdicts against the baseline and the stored trends, once this run is recorded."""
    try:
        history, why_fresh = open_history(options.database)
    except HistoryError as error:  # the reports are still published
        return _Judged([], {}, [f"{error}: nothing was judged or recorded"])
    remarks = [why_fresh] if why_fresh else []
    try:
        verdicts: list[Verdict] = []
        if options.baseline:
            baseline = history.resolve(options.baseline)
            if baseline is None:
                stored = ", ".join(c[:10] for c in history.commits()) or "none"
                remarks.append(
                    f"baseline {options.baseline!r} is not in {options.database} "
                    f"(stored: {stored}): nothing was judged against it"
                )
            else:
                comparison = history.compare(report_set, baseline)
                verdicts = comparison.verdicts
                remarks += comparison.remarks
        history.record(report_set, options.commit)
        return _Judged(verdicts, history.trends(), remarks)
    finally:
        history.close()
