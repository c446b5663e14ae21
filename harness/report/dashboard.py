"""One self-contained HTML page of a ReportSet: a grid of cells, filters, and a details panel.

Rows are (chapter, kernel, case) with the compile cell first; columns are target@runner, plus
one column marked MISSING per expected target with no report. The grid is rendered here, every
text escaped; each cell's full record (message, log, properties, samples, trend) travels as one
JSON blob that dashboard.js turns into the details panel. No network, no external fonts.
"""

from __future__ import annotations

import html
import json
import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from string import Template

from harness.report.junit import properties_of
from harness.report.merge import ReportSet
from harness.report.verdict import Verdict
from harness.result import Cell

_HERE = Path(__file__).parent
OUTCOMES = ("passed", "failed", "error", "skipped")

Trends = Mapping[tuple[str, str, str], Sequence[tuple[str, float]]]


@dataclass
class _Column:
    key: str  # cell.column, or the bare target of a missing one
    target: str
    runner: str = ""
    devices: set[str] = field(default_factory=set)
    counts: Counter = field(default_factory=Counter)
    missing: bool = False


def render_dashboard(
    report_set: ReportSet, trends: Trends, verdicts: Sequence[Verdict] = ()
) -> str:
    columns = _columns(report_set)
    page = Template((_HERE / "dashboard.html").read_text())
    return page.substitute(
        css=(_HERE / "dashboard.css").read_text(),
        js=(_HERE / "dashboard.js").read_text(),
        status=_status(report_set),
        header=_header(report_set),
        filters=_filters(report_set, columns),
        grid=_grid(report_set, columns),
        data=_json_blob(report_set.cells, trends, {id(v.cell): v for v in verdicts}),
    )


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _target_order(target: str) -> tuple[int, str]:
    match = re.search(r"(\d+)(\D*)$", target)
    return (int(match.group(1)), match.group(2)) if match else (0, target)


def _columns(report_set: ReportSet) -> list[_Column]:
    columns: dict[str, _Column] = {}
    for cell in report_set.cells:
        column = columns.setdefault(cell.column, _Column(cell.column, cell.target, cell.runner))
        column.devices.add(cell.provenance.device or "none")
        column.counts[cell.outcome.value] += 1
    for target in report_set.missing_targets:
        columns.setdefault(target, _Column(target, target, missing=True))
    return sorted(columns.values(), key=lambda c: (_target_order(c.target), c.runner))


def _status(report_set: ReportSet) -> str:
    counts = Counter(cell.outcome.value for cell in report_set.cells)
    bad = [f"{counts[o]} {o}" for o in ("failed", "error") if counts[o]]
    if bad or report_set.problems or report_set.missing_targets or not report_set.cells:
        reasons = []
        if bad:
            reasons.extend(bad)
        if report_set.missing_targets:
            reasons.append(f"{len(report_set.missing_targets)} target(s) missing")
        if report_set.problems:
            reasons.append(f"{len(report_set.problems)} unreadable report(s)")
        if not report_set.cells:
            reasons.append("no cells")
        return f'<div id="status" class="status bad">NOT OK: {_e(", ".join(reasons))}</div>'
    if report_set.never_ran():
        return '<div id="status" class="status warn">NO FAILURES, but kernels never ran</div>'
    return '<div id="status" class="status ok">OK: nothing failed</div>'


def _header(report_set: ReportSet) -> str:
    outcomes = Counter(cell.outcome.value for cell in report_set.cells)
    reasons = Counter(c.skip_reason.value for c in report_set.cells if c.skip_reason)
    chips = [f'<span class="chip total">{len(report_set.cells)} cells</span>']
    for outcome in (*OUTCOMES, *sorted(set(outcomes) - set(OUTCOMES))):
        zero = "" if outcomes[outcome] else " zero"
        chips.append(
            f'<span class="chip outcome-{_slug(outcome)}{zero}" data-count="{_e(outcome)}">'
            f"{_e(outcome)} <b>{outcomes[outcome]}</b></span>"
        )
    for reason, count in sorted(reasons.items()):
        chips.append(
            f'<span class="chip outcome-skipped reason-{_slug(reason)}" data-count="skipped:'
            f'{_e(reason)}">skipped: {_e(reason)} <b>{count}</b></span>'
        )
    parts = [f'<div id="counts">{"".join(chips)}</div>']
    if report_set.problems:
        items = "".join(f"<li>{_e(p)}</li>" for p in report_set.problems)
        parts.append(
            f'<div id="problems" class="banner bad"><b>{len(report_set.problems)} report '
            f"problem(s), their cells are not shown:</b><ul>{items}</ul></div>"
        )
    if report_set.missing_targets:
        names = ", ".join(report_set.missing_targets)
        parts.append(
            f'<div id="missing" class="banner bad"><b>MISSING targets: {_e(names)}</b> — no '
            "report was read for them; their columns are marked MISSING, not passed.</div>"
        )
    never = report_set.never_ran()
    if never:
        parts.append(
            f'<div id="never-ran" class="banner warn"><b>{len(never)} kernel(s) never ran</b> '
            f"on any target (every run cell skipped or errored): {_e(', '.join(never))}</div>"
        )
    sources = ", ".join(str(s) for s in report_set.sources) or "none"
    parts.append(f'<div class="sources">reports read: {_e(sources)}</div>')
    return "\n".join(parts)


def _filters(report_set: ReportSet, columns: list[_Column]) -> str:
    chapters = sorted({cell.chapter for cell in report_set.cells})
    targets = sorted({c.target for c in columns}, key=_target_order)
    outcomes = sorted({c.outcome.value for c in report_set.cells}, key=_outcome_order)
    reasons = sorted({c.skip_reason.value for c in report_set.cells if c.skip_reason})
    outcome_options = [("", "all outcomes"), ("not-passed", "not passed")]
    outcome_options += [(o, o) for o in outcomes]
    outcome_options += [(f"skipped:{r}", f"skipped: {r}") for r in reasons]
    return "\n".join(
        [
            _select(
                "filter-chapter", "chapter", [("", "all chapters")] + [(c, c) for c in chapters]
            ),
            _select("filter-target", "target", [("", "all targets")] + [(t, t) for t in targets]),
            _select("filter-outcome", "outcome", outcome_options),
            '<span id="visible-count"></span>',
        ]
    )


def _outcome_order(outcome: str) -> int:
    return OUTCOMES.index(outcome) if outcome in OUTCOMES else len(OUTCOMES)


def _select(id_: str, label: str, options: list[tuple[str, str]]) -> str:
    body = "".join(f'<option value="{_e(v)}">{_e(text)}</option>' for v, text in options)
    return f'<label>{_e(label)} <select id="{id_}">{body}</select></label>'


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9-]+", "-", text.lower())


def _grid(report_set: ReportSet, columns: list[_Column]) -> str:
    # chapter -> kernel -> case -> column -> [cell index]; cases keep report order, compile first
    tree: dict[str, dict[str, dict[str, dict[str, list[int]]]]] = {}
    for index, cell in enumerate(report_set.cells):
        cases = tree.setdefault(cell.chapter, {}).setdefault(cell.kernel, {})
        cases.setdefault(cell.row, {}).setdefault(cell.column, []).append(index)
    never = set(report_set.never_ran())
    width = len(columns) + 1
    head = "".join(_column_head(c) for c in columns)
    body = []
    for chapter in sorted(tree):
        ch = _e(chapter)
        body.append(
            f'<tr class="chapter-row" data-chapter="{ch}"><th colspan="{width}">{ch}</th></tr>'
        )
        for kernel in sorted(tree[chapter]):
            classname = f"{chapter}.{kernel}"
            flag = '<span class="flag">never ran</span>' if classname in never else ""
            body.append(
                f'<tr class="kernel-row" data-chapter="{ch}" data-kernel="{_e(classname)}">'
                f'<th colspan="{width}">{_e(kernel)}{flag}</th></tr>'
            )
            cases = tree[chapter][kernel]
            for case in sorted(cases, key=lambda c: c not in ("spec", "compile")):
                slots = "".join(
                    _slot(report_set.cells, column, cases[case].get(column.key, []))
                    for column in columns
                )
                body.append(
                    f'<tr class="case-row" data-chapter="{ch}" data-kernel="{_e(classname)}">'
                    f'<th class="case">{_e(case)}</th>{slots}</tr>'
                )
    return (
        f'<table id="grid"><thead><tr><th class="corner">kernel / case</th>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table>"
    )


def _column_head(column: _Column) -> str:
    target = _e(column.target)
    if column.missing:
        return (
            f'<th class="col missing" data-target="{target}">{target}'
            '<div class="sub">MISSING: no report</div></th>'
        )
    devices = ", ".join(sorted(column.devices))
    counts = ", ".join(f"{column.counts[o]} {o}" for o in sorted(column.counts, key=_outcome_order))
    return (
        f'<th class="col" data-target="{target}">{target}'
        f'<div class="sub">{_e(column.runner)} · {_e(devices)}</div>'
        f'<div class="sub">{_e(counts)}</div></th>'
    )


def _slot(cells: list[Cell], column: _Column, indices: list[int]) -> str:
    target = _e(column.target)
    if column.missing:
        return f'<td class="slot missing" data-target="{target}"><div>MISSING</div></td>'
    if not indices:
        return f'<td class="slot absent" data-target="{target}"><div>&ndash;</div></td>'
    inner = "".join(_cell(i, cells[i]) for i in indices)
    return f'<td class="slot" data-target="{target}">{inner}</td>'


def _cell(index: int, cell: Cell) -> str:
    outcome = cell.outcome.value
    skip_reason = cell.skip_reason.value if cell.skip_reason else ""
    label = f"skipped: {skip_reason}" if skip_reason else outcome
    lines = []
    registers = cell.compile.worst("registers") if cell.compile else None
    if cell.median_us is not None:
        lines.append(f'<span class="time">{_fmt_us(cell.median_us)}</span>')
        if cell.throughput and cell.throughput.roofline_pct is not None:
            lines.append(f'<span class="minor">{cell.throughput.roofline_pct:.1f}% roof</span>')
    elif outcome == "passed" and registers is not None:
        spills = cell.compile.worst("spill_bytes")
        extra = f' <span class="spill">spill {spills} B</span>' if spills else ""
        lines.append(f'<span class="minor">{registers} reg{extra}</span>')
    if outcome in ("failed", "error") and cell.message:
        lines.append(f'<span class="why">{_e(cell.message.splitlines()[0][:80])}</span>')
    reason = f" reason-{_slug(skip_reason)}" if skip_reason else ""
    tip = f"{cell.classname} {cell.name} @ {cell.runner}: {cell.message or outcome}"
    return (
        f'<div class="cell outcome-{_slug(outcome)}{reason}" tabindex="0" data-index="{index}" '
        f'data-chapter="{_e(cell.chapter)}" data-target="{_e(cell.target)}" '
        f'data-column="{_e(cell.column)}" data-outcome="{_e(outcome)}" '
        f'data-skip-reason="{_e(skip_reason)}" title="{_e(tip)}">'
        f'<span class="label">{_e(label)}</span>{"".join(lines)}</div>'
    )


def _fmt_us(value: float) -> str:
    if value >= 1000:
        return f"{value / 1000:.2f} ms"
    return f"{value:.2f} µs" if value < 10 else f"{value:.1f} µs"


def _json_blob(cells: list[Cell], trends: Trends, verdicts: Mapping[int, Verdict]) -> str:
    records = [
        {
            "classname": c.classname,
            "name": c.name,
            "column": c.column,
            "target": c.target,
            "runner": c.runner,
            "device": c.provenance.device or "none",
            "outcome": c.outcome.value,
            "skip_reason": c.skip_reason.value if c.skip_reason else None,
            "message": c.message,
            "detail": c.detail,
            "properties": properties_of(c),  # as JUnit shows them: text to display
            "timing": None
            if c.timing is None
            else {
                "median_us": c.timing.median_us,
                "p10_us": c.timing.p10_us,
                "p90_us": c.timing.p90_us,
            },
            "samples_us": [_finite(v) for v in c.timing.samples_us] if c.timing else [],
            "trend": [[str(run), _finite(v)] for run, v in trends.get(_trend_key(c), ())],
            "verdict": _verdict(verdicts.get(id(c))),
        }
        for c in cells
    ]
    text = json.dumps(records, separators=(",", ":"), allow_nan=False)
    # Nothing in the blob may close the <script> element or start a comment inside it.
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None  # JSON has no NaN; the JS drops nulls


def _trend_key(cell: Cell) -> tuple[str, str, str]:
    return (cell.column, cell.classname, cell.name)


def _verdict(verdict: Verdict | None) -> dict | None:
    if verdict is None:
        return None
    return {
        "judgement": verdict.judgement.value,
        "ratio": verdict.ratio,
        "low": verdict.low,
        "high": verdict.high,
        "threshold_pct": verdict.threshold_pct,
        "baseline_us": verdict.baseline_us,
        "same_binary": verdict.same_binary,
    }
