"""One self-contained HTML page of a ReportSet: a grid of cells, filters, and a details panel.

Rows are (chapter, kernel, case) with the kernel's own cells (spec, compile) first; columns are
target@runner, plus one column marked MISSING per expected target with no report. The grid is
rendered here, every text escaped; each cell's full record (message, log, properties, samples,
trend) travels as one JSON blob that dashboard.js turns into the details panel. No network, no
external fonts.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import jinja2
import markupsafe

from harness.model.cell import ABComparison, Cell, Judgement
from harness.model.matrix import DevicePeaks
from harness.model.outcome import CellKind, Outcome
from harness.model.text import shown_controls
from harness.report.charts import View, rooflines, vendor_bars
from harness.report.history import Trends
from harness.report.junit import properties_of
from harness.report.merge import ReportSet
from harness.report.status import Status, status_of
from harness.report.summary import (
    compiled_only,
    describe_ab,
    natural_key,
    row_key,
)
from harness.report.verdict import Verdict

_HERE = Path(__file__).parent
OUTCOMES = ("passed", "failed", "error", "skipped")

# A page of more cells than this lists only the notable ones (_listed)
LISTED_CELLS = 50_000


@dataclass
class _Column:
    key: str  # cell.column, or the bare target of a missing one
    target: str
    runner: str = ""
    devices: set[str] = field(default_factory=set)
    counts: Counter[str] = field(default_factory=Counter)
    missing: bool = False


def render_dashboard(
    report_set: ReportSet,
    trends: Trends,
    verdicts: Sequence[Verdict] = (),
    peaks: Mapping[str, DevicePeaks] | None = None,
    inspected: Mapping[str, tuple[int, int]] | None = None,
    status: Status | None = None,
) -> str:
    """The page; `peaks` (matrix.yaml's devices, by name) draw each device's rooflines;
    `inspected`: compiled_only's columns, where the caller has them already; `status`: the
    verdict `report` gives (status_of's, the report set's alone by default)."""
    columns = _columns(report_set)
    cells, listed_note = _listed(report_set.cells, verdicts)
    if inspected is None:
        inspected = compiled_only(report_set.reports)
    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(_HERE),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=False,
        finalize=_without_controls,
    )
    page = environment.get_template("dashboard.html")
    return page.render(
        css=(_HERE / "dashboard.css").read_text(),
        js=(_HERE / "dashboard.js").read_text(),
        status=status or status_of(report_set),
        cell_count=len(report_set.cells),
        chips=_chips(report_set),
        problems=[*report_set.problems, *report_set.shard_problems],
        missing=report_set.missing_targets,
        never_ran=report_set.never_ran(),
        sources=", ".join(str(s) for s in report_set.sources) or "none",
        selects=_selects(report_set, columns),
        listed_note=listed_note,
        rooflines=rooflines(cells, peaks or {}),
        vendor_bars=vendor_bars(cells),
        columns=[_column_view(c, inspected) for c in columns],
        width=len(columns) + 1,
        chapters=_chapters(report_set, cells, columns, {id(v.cell): v for v in verdicts}),
        data=_json_blob(cells, trends, {id(v.cell): v for v in verdicts}),
    )


def _without_controls(value: object) -> object:
    """What the page shows of a text: its control characters (BEL, ESC, NUL: none is valid in
    HTML) as \\xNN, visible; newlines and tabs kept."""
    if not isinstance(value, str) or isinstance(value, markupsafe.Markup):  # ours, made safe
        return value
    return shown_controls(value)


def _listed(cells: list[Cell], verdicts: Sequence[Verdict]) -> tuple[list[Cell], str]:
    """The cells the page lists, and what it says of those it does not: every cell up to
    LISTED_CELLS; beyond, those that did not pass or were judged other than SAME (at most
    LISTED_CELLS of them), so a page of a million cells stays one a browser can open."""
    if len(cells) <= LISTED_CELLS:
        return cells, ""
    moved = {id(v.cell) for v in verdicts if v.judgement is not Judgement.SAME}
    notable = [c for c in cells if c.outcome is not Outcome.PASSED or id(c) in moved]
    listed = notable[:LISTED_CELLS]
    return listed, (
        f"{len(cells):,} cells, more than this page lists ({LISTED_CELLS:,}): it lists the "
        f"{len(listed):,} that did not pass or were judged other than SAME"
        + (
            f" (the first {LISTED_CELLS:,} of {len(notable):,})"
            if len(notable) > len(listed)
            else ""
        )
        + ". Every cell is counted above; merged.xml holds them all."
    )


def _target_order(target: str) -> tuple[int, str]:
    match = re.search(r"(\d+)(\D*)$", target)
    return (int(match.group(1)), match.group(2)) if match else (0, target)


def _columns(report_set: ReportSet) -> list[_Column]:
    columns: dict[str, _Column] = {}
    for cell in report_set.cells:
        column = columns.setdefault(cell.column, _Column(cell.column, cell.target, cell.runner))
        column.devices.add(cell.provenance.device or "no GPU")
        column.counts[cell.outcome.value] += 1
    for target in report_set.missing_targets:
        columns.setdefault(target, _Column(target, target, missing=True))
    return sorted(columns.values(), key=lambda c: (_target_order(c.target), c.runner))


def _chips(report_set: ReportSet) -> list[View]:
    outcomes = Counter(cell.outcome.value for cell in report_set.cells)
    reasons = Counter(c.skip_reason.value for c in report_set.cells if c.skip_reason)
    chips = [
        {"slug": _slug(o), "reason": "", "key": o, "label": o, "count": outcomes[o]}
        for o in (*OUTCOMES, *sorted(set(outcomes) - set(OUTCOMES)))
    ]
    chips += [
        {
            "slug": "skipped",
            "reason": _slug(reason),
            "key": f"skipped:{reason}",
            "label": f"skipped: {reason}",
            "count": count,
        }
        for reason, count in sorted(reasons.items())
    ]
    return chips


def _selects(report_set: ReportSet, columns: list[_Column]) -> list[View]:
    chapters = sorted({cell.chapter for cell in report_set.cells})
    targets = sorted({c.target for c in columns}, key=_target_order)
    outcomes = sorted({c.outcome.value for c in report_set.cells}, key=_outcome_order)
    reasons = sorted({c.skip_reason.value for c in report_set.cells if c.skip_reason})
    outcome_options = [("", "all outcomes"), ("not-passed", "not passed")]
    outcome_options += [(o, o) for o in outcomes]
    outcome_options += [(f"skipped:{r}", f"skipped: {r}") for r in reasons]
    return [
        {
            "id": "filter-chapter",
            "label": "chapter",
            "options": [("", "all chapters")] + [(c, c) for c in chapters],
        },
        {
            "id": "filter-target",
            "label": "target",
            "options": [("", "all targets")] + [(t, t) for t in targets],
        },
        {"id": "filter-outcome", "label": "outcome", "options": outcome_options},
    ]


def _outcome_order(outcome: str) -> int:
    return OUTCOMES.index(outcome) if outcome in OUTCOMES else len(OUTCOMES)


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9-]+", "-", text.lower())


def _column_view(column: _Column, only_built: Mapping[str, tuple[int, int]]) -> View:
    counts = ", ".join(f"{column.counts[o]} {o}" for o in sorted(column.counts, key=_outcome_order))
    if column.key in only_built:
        counts += " · compiled and inspected only: no runner here has a GPU for it"
    return {
        "missing": column.missing,
        "target": column.target,
        "runner": column.runner,
        "devices": ", ".join(sorted(column.devices)),
        "counts": counts,
    }


def _chapters(
    report_set: ReportSet,
    cells: list[Cell],
    columns: list[_Column],
    verdicts: Mapping[int, Verdict],
) -> list[View]:
    """chapter -> kernel -> rows (in summary.row_key's order: by kind, then naturally) -> a slot
    per column, each with its cells."""
    tree: dict[str, dict[str, dict[tuple[CellKind, str], dict[str, list[int]]]]] = {}
    for index, cell in enumerate(cells):
        cases = tree.setdefault(cell.chapter, {}).setdefault(cell.kernel, {})
        cases.setdefault((cell.kind, cell.row), {}).setdefault(cell.column, []).append(index)
    never = set(report_set.never_ran())
    chapters: list[View] = []
    for chapter in sorted(tree, key=natural_key):
        kernels: list[View] = []
        for kernel in sorted(tree[chapter], key=natural_key):
            cases = tree[chapter][kernel]
            rows = [
                {
                    "case": row,
                    "slots": [
                        {
                            "missing": column.missing,
                            "target": column.target,
                            "cells": [
                                _cell_view(i, cells[i], verdicts)
                                for i in cases[kind, row].get(column.key, [])
                            ],
                        }
                        for column in columns
                    ],
                }
                for kind, row in sorted(cases, key=lambda kind_row: row_key(*kind_row))
            ]
            classname = f"{chapter}.{kernel}"
            kernels.append(
                {
                    "name": kernel,
                    "classname": classname,
                    "never_ran": classname in never,
                    "rows": rows,
                }
            )
        chapters.append({"name": chapter, "kernels": kernels})
    return chapters


def _cell_view(index: int, cell: Cell, verdicts: Mapping[int, Verdict]) -> View:
    outcome = cell.outcome.value
    skip_reason = cell.skip_reason.value if cell.skip_reason else ""
    lines = []
    registers = cell.compile.worst("registers") if cell.compile else None
    if cell.median_us is not None:
        lines.append({"kind": "time", "text": _fmt_us(cell.median_us), "spill": ""})
        if cell.throughput and cell.throughput.roofline_pct is not None:
            lines.append(
                {"kind": "minor", "text": f"{cell.throughput.roofline_pct:.1f}% roof", "spill": ""}
            )
    elif cell.carried_from is not None:  # passed on an earlier run's word: where from
        text = f"carried {cell.carried_from.commit[:10]}"
        lines.append({"kind": "minor", "text": text, "spill": ""})
    elif outcome == "passed" and registers is not None:
        spills = cell.compile.worst("spill_bytes") if cell.compile else None
        lines.append(
            {
                "kind": "minor",
                "text": f"{registers} reg",
                "spill": f"spill {spills} B" if spills else "",
            }
        )
    verdict = verdicts.get(id(cell))
    if verdict and verdict.judgement is not Judgement.SAME:
        kind = f"verdict {_slug(verdict.judgement.value)}"
        text = f"{verdict.judgement.value} {verdict.ratio:.3f}"
        lines.append({"kind": kind, "text": text, "spill": ""})
    if outcome in ("failed", "error") and cell.message:
        lines.append({"kind": "why", "text": cell.message.splitlines()[0][:80], "spill": ""})
    return {
        "index": index,
        "slug": _slug(outcome),
        "reason_slug": _slug(skip_reason) if skip_reason else "",
        "chapter": cell.chapter,
        "target": cell.target,
        "column": cell.column,
        "outcome": outcome,
        "skip_reason": skip_reason,
        "tip": f"{cell.classname} {cell.name} @ {cell.runner}: {cell.message or outcome}",
        "label": f"skipped: {skip_reason}" if skip_reason else outcome,
        "lines": lines,
    }


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
            "device": c.provenance.device,
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
            "histogram": _histogram(c.timing.samples_us) if c.timing else None,
            "trend": [[str(run), _finite(v)] for run, v in trends.get(_trend_key(c), ())],
            "verdict": _verdict(verdicts.get(id(c))),
            "ab": _ab(c.ab),
        }
        for c in cells
    ]
    text = json.dumps(records, separators=(",", ":"), allow_nan=False)
    # Nothing in the blob may close the <script> element or start a comment inside it.
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


def _histogram(samples: Sequence[float]) -> View | None:
    """The samples binned for the details panel (hundreds of samples per cell, thousands of
    cells: the page carries bins, not samples). The long tail past six spreads of the p10-p90
    above the median (a preempted launch) is counted apart, so the body stays readable."""
    values = sorted(v for v in samples if math.isfinite(v))
    if not values:
        return None

    def q(share: float) -> float:
        return values[min(len(values) - 1, math.floor(share * (len(values) - 1)))]

    spread = max(q(0.9) - q(0.1), 0.01 * q(0.5))
    low, high = values[0], min(values[-1], q(0.5) + 6 * spread)
    shown = [v for v in values if v <= high]
    if high == low:
        low, high = low - 0.5, high + 0.5
    bins = min(40, max(5, math.ceil(math.sqrt(len(shown)))))
    counts = [0] * bins
    for value in shown:
        counts[min(bins - 1, math.floor((value - low) / (high - low) * bins))] += 1
    return {
        "low": low,
        "high": high,
        "counts": counts,
        "samples": len(values),
        "clipped": len(values) - len(shown),
        "largest": values[-1],
    }


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None  # JSON has no NaN; the JS drops nulls


def _trend_key(cell: Cell) -> tuple[str, str, str]:
    return (cell.column, cell.classname, cell.name)


def _verdict(verdict: Verdict | None) -> View | None:
    if verdict is None:
        return None
    return {
        "judgement": verdict.judgement.value,
        "ratio": verdict.ratio,
        "low": verdict.low,
        "high": verdict.high,
        "threshold_pct": verdict.threshold_pct,
        "baseline_us": verdict.baseline_us,
        "same_code": verdict.same_code,
        "slug": _slug(verdict.judgement.value),
        "shared_gpu": verdict.shared_gpu,
    }


def _ab(ab: ABComparison | None) -> View | None:
    """The same-GPU A/B as the details panel says it."""
    if ab is None:
        return None
    return {
        "judgement": ab.judgement.value,
        "slug": _slug(ab.judgement.value),
        "base_commit": ab.base_commit,
        "text": describe_ab(ab),
    }
