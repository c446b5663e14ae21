"""The one verdict on a set of reports: OK, NO FAILURES but kernels never ran, or NOT OK with
its reasons. The dashboard shows it, summary.md opens with it, and `report` exits 1 whenever it
is NOT OK, so that none of the three can say another thing than the others."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from harness.report.merge import ReportSet


@dataclass(frozen=True)
class Status:
    kind: str  # "ok", "warn" (nothing failed, but kernels never ran) or "bad"
    text: str

    @property
    def ok(self) -> bool:
        return self.kind != "bad"


def status_of(report_set: ReportSet, failures: Sequence[str] = ()) -> Status:
    """`failures`: what else `report` fails on (the slowdown gate, --strict, a report of a run
    that did not finish, no report at all), each a reason of its own; an unreadable report
    among them is counted once."""
    counts = Counter(cell.outcome.value for cell in report_set.cells)
    reasons = [f"{counts[o]} {o}" for o in ("failed", "error") if counts[o]]
    if report_set.missing_targets:
        reasons.append(f"{len(report_set.missing_targets)} target(s) missing")
    if report_set.shard_problems:
        reasons.append(f"{len(report_set.shard_problems)} shard problem(s)")
    if report_set.problems:
        reasons.append(f"{len(report_set.problems)} unreadable report(s)")
    if not report_set.cells:
        reasons.append("no cells")
    others = [f for f in failures if f not in report_set.problems]
    if others:
        reasons.append(f"{len(others)} other failure(s) (listed below)")
    if reasons:
        return Status("bad", f"NOT OK: {', '.join(reasons)}")
    if report_set.never_ran():
        return Status("warn", "NO FAILURES, but kernels never ran")
    return Status("ok", "OK: nothing failed")
