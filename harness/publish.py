"""From per-target reports to what people read: merged.xml, summary.md, dashboard.html, and the
history they are compared against."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from harness.dashboard import render_dashboard
from harness.history import History, Verdict
from harness.merge import ReportSet, load_reports, write_merged_xml
from harness.summary import render_summary


@dataclass(frozen=True)
class PublishOptions:
    reports: list[Path]  # JUnit XML files, each with its JSON sidecar
    expected_targets: list[str]
    out: Path
    database: Path
    commit: str
    baseline: str | None = None
    max_slowdown_pct: float | None = None  # SLOWER beyond this fails the exit code
    strict: bool = False  # a kernel that never ran fails the exit code


@dataclass
class Published:
    report_set: ReportSet
    verdicts: list[Verdict]
    files: list[Path]
    failures: list[str] = field(default_factory=list)  # why the exit code is not 0


def current_commit(root: Path) -> str:
    try:
        result = subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=root, timeout=30
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return result.stdout.strip() if result.returncode == 0 else "unknown"


def publish(options: PublishOptions) -> Published:
    report_set = load_reports(options.reports, options.expected_targets)
    history = History(options.database)
    try:
        verdicts: list[Verdict] = []
        failures: list[str] = list(report_set.problems)
        if options.baseline:
            baseline = history.resolve(options.baseline)
            if baseline is None:
                failures.append(
                    f"baseline {options.baseline!r} is not in {options.database} "
                    f"(stored: {', '.join(c[:10] for c in history.commits()) or 'none'})"
                )
            else:
                verdicts = history.compare(report_set, baseline)
        history.record(report_set, options.commit)
        trends = history.trends()
    finally:
        history.close()
    out = options.out
    out.mkdir(parents=True, exist_ok=True)
    write_merged_xml(report_set, out / "merged.xml")
    (out / "summary.md").write_text(render_summary(report_set, verdicts))
    (out / "dashboard.html").write_text(render_dashboard(report_set, trends))
    if options.max_slowdown_pct is not None:
        for verdict in verdicts:
            if verdict.judgement == "SLOWER" and verdict.change_pct > options.max_slowdown_pct:
                cell = verdict.cell
                failures.append(
                    f"{cell.classname} {cell.name} on {cell.runner}: {verdict.change_pct:.1f} % "
                    f"slower than the baseline (limit {options.max_slowdown_pct:g} %)"
                )
    if options.strict:
        failures += [f"{kernel} never ran on any target" for kernel in report_set.never_ran()]
        failures += [f"target {t} has no report" for t in report_set.missing_targets]
    files = [out / "merged.xml", out / "summary.md", out / "dashboard.html"]
    return Published(report_set, verdicts, files, failures)
