"""The merged matrix as markdown, fit for $GITHUB_STEP_SUMMARY: what broke first, then the grid.

A skipped cell never reads as green: it shows its reason.
"""

from __future__ import annotations

from collections import Counter

from harness.report.merge import ReportSet
from harness.report.verdict import Judgement, Verdict
from harness.result import Cell, Outcome

MARK = {Outcome.PASSED: "✅ passed", Outcome.FAILED: "❌ failed", Outcome.ERROR: "💥 error"}


def _shown(cell: Cell, verdict: Verdict | None) -> str:
    if cell.outcome is Outcome.SKIPPED:
        return f"⏭️ {cell.skip_reason.value if cell.skip_reason else 'skipped'}"
    text = MARK[cell.outcome]
    if cell.median_us is not None:
        text += f" {cell.median_us:.1f} µs"
    if cell.timing and cell.timing.sm_clock_mhz:
        text += f" @{cell.timing.sm_clock_mhz} MHz"
    if cell.timing and cell.timing.throttled_samples:
        text += f" ({cell.timing.throttled_samples} throttled)"
    if verdict:
        text += f" · {verdict.judgement.value} {verdict.ratio:.3f}"
    return text


def _escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ").replace("<", "&lt;")


def render_summary(
    report_set: ReportSet, verdicts: list[Verdict] = (), remarks: list[str] = ()
) -> str:
    """`remarks`: what the reader must know of the comparison (a baseline that is not stored)."""
    counts = Counter(cell.outcome for cell in report_set.cells)
    reasons = Counter(cell.skip_reason.value for cell in report_set.cells if cell.skip_reason)
    head = ", ".join(f"{counts.get(o, 0)} {o.value}" for o in Outcome)
    if reasons:
        head += " (" + ", ".join(f"{n} {r}" for r, n in sorted(reasons.items())) + ")"
    lines = [f"# CUDA matrix: {head}"]
    notes: list[str] = []
    for problem in report_set.problems:
        notes.append(f"- ⚠️ unreadable input: {_escape(problem)}")
    for target in report_set.missing_targets:
        notes.append(f"- ⚠️ target `{target}`: MISSING, no report was given for it")
    for kernel in report_set.never_ran():
        notes.append(f"- ⚠️ `{kernel}` never ran: its run cells were skipped everywhere")
    notes += [f"- ⚠️ {_escape(remark)}" for remark in remarks]
    slower = [v for v in verdicts if v.judgement is Judgement.SLOWER]
    if verdicts:
        judged = Counter(v.judgement for v in verdicts)
        notes.append(
            "- against the baseline: "
            + ", ".join(f"{judged.get(j, 0)} {j.value}" for j in Judgement)
        )
    if notes:
        lines += ["", *notes]
    broken = [c for c in report_set.cells if c.outcome in (Outcome.FAILED, Outcome.ERROR)]
    if broken:
        lines += ["", "## Failures", ""]
        for cell in broken:
            lines.append(
                f"- {MARK[cell.outcome]} `{cell.classname}` `{cell.name}` on {cell.runner}: "
                f"{_escape(cell.message)}"
            )
    if slower:
        lines += ["", "## Slower than the baseline", ""]
        for verdict in sorted(slower, key=lambda v: -v.ratio):
            cell = verdict.cell
            lines.append(
                f"- `{cell.classname}` `{cell.name}` on {cell.runner}: "
                f"{verdict.baseline_us:.1f} → {cell.median_us:.1f} µs "
                f"(ratio {verdict.ratio:.3f}, 95 % interval {verdict.low:.3f}-{verdict.high:.3f}, "
                f"rerun threshold {verdict.threshold_pct:g} %; {_cause(verdict)})"
            )
    judged_cells = {id(v.cell): v for v in verdicts}
    columns = sorted({cell.column for cell in report_set.cells})
    columns += [f"{target} (MISSING)" for target in report_set.missing_targets]
    chapters: dict[str, dict[tuple[str, str], dict[str, Cell]]] = {}
    for cell in report_set.cells:
        rows = chapters.setdefault(cell.chapter, {})
        rows.setdefault((cell.kernel, cell.row), {})[cell.column] = cell
    for chapter in sorted(chapters):
        lines += ["", f"## {chapter}", ""]
        lines.append("| kernel | case | " + " | ".join(columns) + " |")
        lines.append("|---|---|" + "---|" * len(columns))
        for (kernel, case), by_column in sorted(chapters[chapter].items()):
            shown = [
                _shown(by_column[c], judged_cells.get(id(by_column[c]))) if c in by_column else "—"
                for c in columns
            ]
            lines.append(f"| {kernel} | {case} | " + " | ".join(shown) + " |")
    return "\n".join(lines) + "\n"


def _cause(verdict: Verdict) -> str:
    if verdict.same_binary:
        return "the binary is the baseline's, byte for byte: the environment, not the code"
    if verdict.same_binary is None:
        return "no binary hash to tell code from environment"
    return "the binary changed"
