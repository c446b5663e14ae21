"""The merged matrix as markdown, fit for a pull request ($GITHUB_STEP_SUMMARY).

In this order: the headline counts, verdicts and A/B counts; what broke, what got slower than
the baseline, and what the same-GPU A/B found (anything but SAME or IDENTICAL), each with its
message, its numbers or why; a compact grid (a kernel per row, in chapter groups and natural
order, a column per target in matrix.yaml's order and runner, each cell the worst outcome of the
kernel there and its count); then the per-case results, folded away in one `<details>` line
per chapter. Kernels that never ran are one line that says why. A skipped cell never reads as
green.

Text from the reports stays text where it lands (a kernel, a case, a message and a runner are
all a spec's or a user's to name): names in code spans, the rest escaped of markdown's markup,
raw HTML and GitHub's autolinks, the folded details escaped as HTML, and control characters
shown as \\xNN in all of them.
"""

from __future__ import annotations

import html
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

from harness.model.cell import AB_JUDGEMENTS, ABComparison, Cell, Judgement, Report
from harness.model.outcome import CellKind, Outcome, SkipReason
from harness.model.text import shown_controls
from harness.report.merge import ReportSet
from harness.report.status import Status, status_of
from harness.report.verdict import VERDICT_JUDGEMENTS, Verdict, unconfirmed

MARK = {
    Outcome.PASSED: "✅",
    Outcome.FAILED: "❌",
    Outcome.ERROR: "💥",
    Outcome.SKIPPED: "⏭️",
}
# summary.md stays a page GitHub shows (a step summary is at most 1 MiB): at most this many lines
# of a list, kernels in the grid, and cells in the per-case details
LISTED_LINES = 100
GRID_KERNELS = 500
DETAILED_CELLS = 5_000
WORST_FIRST = (Outcome.ERROR, Outcome.FAILED, Outcome.SKIPPED, Outcome.PASSED)
# The A/Bs the summary lists, in this order; SAME and IDENTICAL are only counted.
AB_LISTED = (
    Judgement.SLOWER,
    Judgement.AMBIGUOUS,
    Judgement.FASTER,
    Judgement.NOT_RUN,
    Judgement.NEW,
)


def natural_key(text: str) -> tuple[tuple[int, int, str], ...]:
    """n5 < n100 < n1000003: digit runs compare as numbers."""
    return tuple(
        (0, int(part), "") if part.isdigit() else (1, 0, part)
        for part in re.split(r"(\d+)", text)
        if part
    )


def row_key(kind: CellKind, row: str) -> tuple[int, tuple[tuple[int, int, str], ...]]:
    """A kernel's rows in the order every report lists them: by kind (the spec's, compile, the
    cases, the sanitizer's), then naturally by name."""
    return (kind.rank, natural_key(row))


# What makes text markup: code spans, links and images, emphasis, strikethrough, table cells.
_MARKUP = re.compile(r"[\\`*~\[\]|]")
# An underscore emphasises only where a word does not go on across it (scale_bias stays).
_LONE_UNDERSCORE = re.compile(r"(?<![0-9A-Za-z])_|_(?![0-9A-Za-z])")
# GitHub's autolinks: a scheme's "://", "www." and an e-mail address's "@"
_URL = re.compile(r"://|(?i:\bwww)\.")
_ADDRESS = re.compile(r"@(?=[\w-]+(?:\.[\w-]+)+)")  # sm_90a@vm is none: no dot after it


def _visible(text: str) -> str:
    """One line, with every control character shown rather than sent."""
    return shown_controls(re.sub(r"\r\n|[\r\n\t]", " ", text))


def _md(text: str) -> str:
    """Text that renders as itself in markdown, a table cell included, and stays text there: no
    code span, link, image, emphasis, raw HTML, entity or autolink of its own making."""
    text = _MARKUP.sub(lambda found: "\\" + found.group(), _visible(text))
    text = _LONE_UNDERSCORE.sub(r"\\_", text)
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    text = _URL.sub(lambda found: found.group()[:-1] + "\\" + found.group()[-1], text)
    return _ADDRESS.sub("&#8203;@", text)  # a zero-width space: no address before the @


def _code(text: str) -> str:
    """`text` as a code span that shows it as it is (nothing in a code span is markup): fenced by
    more backticks than any run of them in it. Not for table cells, where `|` still splits."""
    text = _visible(text)
    fence = "`" * (1 + max((len(run) for run in re.findall(r"`+", text)), default=0))
    pad = " " if text.startswith("`") or text.endswith("`") or not text.strip() else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _html(text: str) -> str:
    return html.escape(_visible(text))


def _columns(report_set: ReportSet, targets: list[str]) -> list[str]:
    """target@runner columns: targets in matrix.yaml's order, runners by name within each."""
    order = {target: index for index, target in enumerate(targets)}
    present = {(cell.target, cell.runner) for cell in report_set.cells}
    ranked = sorted(present, key=lambda tr: (order.get(tr[0], len(order)), tr[0], tr[1]))
    return [f"{target}@{runner}" for target, runner in ranked]


def _grid_entry(cells: list[Cell]) -> str:
    """The worst outcome among `cells` and how many had it (`✅ 6`, `❌ 1/6`)."""
    counts = Counter(cell.outcome for cell in cells)
    worst = next(outcome for outcome in WORST_FIRST if counts.get(outcome))
    shown = f"{MARK[worst]} {counts[worst]}"
    if counts[worst] != len(cells):
        shown += f"/{len(cells)}"
    return shown


def _case_text(cell: Cell, verdict: Verdict | None) -> str:
    if cell.outcome is Outcome.SKIPPED:
        return f"{MARK[cell.outcome]} {cell.skip_reason.value if cell.skip_reason else 'skipped'}"
    text = MARK[cell.outcome]
    if cell.carried_from is not None:
        return f"{text} carried from {cell.carried_from.commit[:10]}"
    if cell.median_us is not None:
        text += f" {cell.median_us:.1f} µs"
    if cell.timing and cell.timing.sm_clock_mhz:
        text += f" @{cell.timing.sm_clock_mhz} MHz"
    if cell.timing and cell.timing.throttled_samples:
        text += f" ({cell.timing.throttled_samples} throttled)"
    if verdict:
        text += f" · {verdict.judgement.value} {verdict.ratio:.3f}"
    if cell.ab and cell.ab.judgement in AB_LISTED:
        shown = cell.ab.judgement.value
        if cell.ab.ratio is not None:
            shown += f" {cell.ab.ratio:.3f}"
        text += f" · A/B {shown}"
    return text


def describe_ab(ab: ABComparison) -> str:
    """An A/B as one line: the judgement, and its numbers where measured, else why."""
    if ab.ratio is None or ab.low is None or ab.high is None:
        return f"{ab.judgement.value}: {ab.why}" if ab.why else ab.judgement.value
    text = f"{ab.judgement.value}, ratio {ab.ratio:.3f} (95 % interval {ab.low:.3f}-{ab.high:.3f}"
    if ab.threshold_pct is not None:
        text += f", threshold {ab.threshold_pct:.2g} %"
    text += f", {ab.rounds} rounds)"
    if ab.base_median_us is not None and ab.head_median_us is not None:
        text += f", {ab.base_median_us:.1f} → {ab.head_median_us:.1f} µs"
    return text


def _ab_bases(cells: Iterable[Cell]) -> dict[str, list[tuple[Cell, ABComparison]]]:
    """The cells with an A/B and their A/B, by the base commit it was against."""
    bases: dict[str, list[tuple[Cell, ABComparison]]] = {}
    for cell in cells:
        if cell.ab is not None:
            bases.setdefault(cell.ab.base_commit, []).append((cell, cell.ab))
    return bases


def _never_ran_line(report_set: ReportSet) -> str | None:
    kernels = report_set.never_ran()
    if not kernels:
        return None
    never = set(kernels)
    reasons = Counter(  # every cell of them, compile cells too: as the headline counts them
        cell.skip_reason.value
        for cell in report_set.cells
        if cell.classname in never and cell.skip_reason
    )
    why = ", ".join(f"{reason} ({count} cells)" for reason, count in reasons.most_common())
    names = ", ".join(_code(kernel) for kernel in kernels)
    count = f"{len(kernels)} kernel" + ("s" if len(kernels) != 1 else "")
    return f"- ⏭️ {count} never ran on any runner, skipped {why}: {names}"


def compiled_only(reports: Iterable[Report]) -> dict[str, tuple[int, int]]:
    """Columns whose builds passed but none of whose run cells ran on a GPU (every one skipped
    device-unsupported or target-unsupported): column -> (compile cells passed, run cells)."""
    compiled: Counter[str] = Counter()
    runs: Counter[str] = Counter()
    ran: set[str] = set()
    unsupported = {SkipReason.DEVICE_UNSUPPORTED, SkipReason.TARGET_UNSUPPORTED}
    for report in reports:
        for cell in report.cells:
            column = cell.column  # every cell of a report has one, but a report may mix them
            if cell.kind is CellKind.COMPILE:
                compiled[column] += cell.outcome is Outcome.PASSED
            elif cell.kind is CellKind.CASE:
                runs[column] += 1
                if cell.outcome is not Outcome.SKIPPED or cell.skip_reason not in unsupported:
                    ran.add(column)
    return {c: (compiled[c], runs[c]) for c in runs if c not in ran and compiled[c]}


# the line a compile log has where a build's code identity could not be read (compile/nvcc.py)
_NO_IDENTITY = re.compile(r"^code identity unavailable: (.+)$", re.MULTILINE)


def identity_unknown(cells: Iterable[Cell]) -> str | None:
    """What a run must say whose builds have no code identity (a cuobjdump it could not run):
    how many kernels, on which columns, and why, as their compile logs say."""
    built = [
        cell
        for cell in cells
        if cell.kind is CellKind.COMPILE
        and cell.compile
        and cell.compile.binary_sha256
        and not cell.compile.code_identity
    ]
    if not built:
        return None
    kernels = len({cell.classname for cell in built})
    columns = ", ".join(sorted({cell.column for cell in built}))
    whys = Counter(found.group(1) for cell in built for found in _NO_IDENTITY.finditer(cell.detail))
    text = (
        f"code identity unknown for {kernels} kernel{'s' if kernels != 1 else ''} on {columns}: "
        "nothing tells unchanged code from changed, so an A/B times them rather than calling "
        "them IDENTICAL, and a slower verdict cannot blame the environment"
    )
    return text + (f" ({whys.most_common(1)[0][0]})" if whys else "")


def headline(report_set: ReportSet, verdicts: Iterable[Verdict] = ()) -> list[str]:
    """The counts, the verdicts against the baseline when there are any, and the A/Bs' counts
    against each base commit."""
    counts = Counter(cell.outcome for cell in report_set.cells)
    reasons = Counter(cell.skip_reason.value for cell in report_set.cells if cell.skip_reason)
    head = ", ".join(f"{counts.get(o, 0)} {o.value}" for o in Outcome)
    if reasons:
        head += " (" + ", ".join(f"{n} {r}" for r, n in sorted(reasons.items())) + ")"
    carried = sum(1 for cell in report_set.cells if cell.carried_from is not None)
    if carried:  # passed, on the word of an earlier run: never launched in this one
        head += f"; {carried} of the passed carried from earlier runs, not launched"
    lines = [head]
    verdicts = list(verdicts)
    if verdicts:
        judged = Counter(v.judgement for v in verdicts)
        lines.append(
            "against the baseline: "
            + ", ".join(f"{judged.get(j, 0)} {j.value}" for j in VERDICT_JUDGEMENTS)
        )
    for base, compared in sorted(_ab_bases(report_set.cells).items()):
        found = Counter(ab.judgement for _, ab in compared)
        said = ", ".join(f"{found.get(j, 0)} {j.value}" for j in AB_JUDGEMENTS)
        lines.append(f"A/B against {_md(base[:10])}: {said}")
    return lines


def render_summary(
    report_set: ReportSet,
    verdicts: Sequence[Verdict] = (),
    remarks: Sequence[str] = (),
    targets: Sequence[str] = (),
    inspected: Mapping[str, tuple[int, int]] | None = None,
    status: Status | None = None,
) -> str:
    """`remarks`: what the reader must know (a baseline that is not stored); `targets`: the
    matrix's targets in its order, for the columns; `inspected`: compiled_only's columns, where
    the caller has them already; `status`: the verdict `report` gives, which the summary opens
    with (status_of's, the report set's alone, by default)."""
    first, *judged_line = headline(report_set, verdicts)
    overall = status or status_of(report_set)
    lines = [f"# CUDA matrix: {_md(overall.text)}", "", first]
    notes = [f"- {line}" for line in judged_line]
    notes += [f"- ⚠️ unreadable input: {_md(problem)}" for problem in report_set.problems]
    notes += [f"- ⚠️ {_md(problem)}" for problem in report_set.shard_problems]
    notes += [
        f"- ⚠️ target {_code(t)}: MISSING, no report was given for it"
        for t in report_set.missing_targets
    ]
    if never := _never_ran_line(report_set):
        notes.append(never)
    if unknown := identity_unknown(report_set.cells):
        notes.append(f"- ⚠️ {_md(unknown)}")
    if inspected is None:
        inspected = compiled_only(report_set.reports)
    for column, (built, runs) in inspected.items():
        notes.append(
            f"- ⏭️ {_code(column)}: compiled and inspected only ({built} builds passed); its "
            f"{runs} run cells never ran: no runner of these reports has a GPU for that target"
        )
    notes += [f"- ⚠️ {_md(remark)}" for remark in remarks]
    if notes:
        lines += ["", *notes]
    broken = [c for c in report_set.cells if c.outcome in (Outcome.FAILED, Outcome.ERROR)]
    if broken:
        lines += ["", "## Failures", ""]
        lines += _capped(
            [
                f"- {MARK[c.outcome]} {_code(c.classname)} {_code(c.name)} on {_md(c.runner)}: "
                f"{_md(c.message)}"
                for c in broken[:LISTED_LINES]
            ],
            len(broken),
        )
    slower = [v for v in verdicts if v.judgement is Judgement.SLOWER]
    if slower:
        lines += ["", "## Slower than the baseline", ""]
        for verdict in sorted(slower, key=lambda v: -v.ratio)[:LISTED_LINES]:
            cell = verdict.cell
            lines.append(
                f"- {_code(cell.classname)} {_code(cell.name)} on {_md(cell.runner)}: "
                f"{verdict.baseline_us:.1f} → {cell.median_us:.1f} µs "
                f"(ratio {verdict.ratio:.3f}, 95 % interval {verdict.low:.3f}-{verdict.high:.3f}, "
                f"cross-run threshold {verdict.threshold_pct:.3g} %; {_md(_cause(verdict))})"
            )
        lines += _capped([], len(slower) - LISTED_LINES)
    for base, compared in sorted(_ab_bases(report_set.cells).items()):
        listed = [(cell, ab) for cell, ab in compared if ab.judgement in AB_LISTED]
        if listed:
            lines += ["", f"## A/B against {_md(base[:10])}", ""]
        lines += _capped(
            [
                f"- {_code(cell.classname)} {_code(cell.name)} on {_md(cell.runner)}: "
                f"{_md(describe_ab(ab))}"
                for cell, ab in sorted(listed, key=_ab_order)[:LISTED_LINES]
            ],
            len(listed),
        )
    columns = _columns(report_set, list(targets))
    columns += [f"{target} (MISSING)" for target in report_set.missing_targets]
    chapters: dict[str, dict[str, dict[str, list[Cell]]]] = {}
    for cell in report_set.cells:
        by_kernel = chapters.setdefault(cell.chapter, {}).setdefault(cell.kernel, {})
        by_kernel.setdefault(cell.column, []).append(cell)
    lines += ["", "| kernel | " + " | ".join(_md(c) for c in columns) + " |"]
    lines.append("|---|" + "---|" * len(columns))
    rows = 0
    for chapter in sorted(chapters, key=natural_key):
        if rows >= GRID_KERNELS:
            break
        lines.append(f"| **{_md(chapter)}** |" + " |" * len(columns))
        for kernel in sorted(chapters[chapter], key=natural_key)[: GRID_KERNELS - rows]:
            by_column = chapters[chapter][kernel]
            shown = [_grid_entry(by_column[c]) if c in by_column else "—" for c in columns]
            lines.append(f"| {_md(kernel)} | " + " | ".join(shown) + " |")
            rows += 1
    kernels = sum(len(by_kernel) for by_kernel in chapters.values())
    if kernels > rows:
        lines += [
            "",
            f"… and {kernels - rows} more kernels: the dashboard and merged.xml hold them",
        ]
    lines.append("")
    if len(report_set.cells) > DETAILED_CELLS:
        lines.append(
            f"Per-case results: {len(report_set.cells)} cells, more than summary.md lists "
            f"({DETAILED_CELLS}); the dashboard and merged.xml hold them."
        )
        return "\n".join(lines) + "\n"
    judged = {id(v.cell): v for v in verdicts}
    for chapter in sorted(chapters, key=natural_key):
        lines.append(_details(chapter, chapters[chapter], columns, judged))
    return "\n".join(lines) + "\n"


def _capped(lines: list[str], total: int) -> list[str]:
    """`lines`, the first of `total`, and a line saying how many more there are."""
    more = total - len(lines)
    return (
        [*lines, f"- … and {more} more: the dashboard and merged.xml list them all"]
        if more > 0
        else lines
    )


def _details(
    chapter: str,
    kernels: Mapping[str, Mapping[str, list[Cell]]],
    columns: list[str],
    judged: Mapping[int, Verdict],
) -> str:
    """One line of HTML: the chapter's per-case results, folded (GitHub renders it as is)."""
    head = "".join(f"<th>{_html(c)}</th>" for c in columns)
    rows = []
    for kernel in sorted(kernels, key=natural_key):
        by_row: dict[tuple[CellKind, str], dict[str, Cell]] = {}
        for column, cells in kernels[kernel].items():
            for cell in cells:
                by_row.setdefault((cell.kind, cell.row), {})[column] = cell
        for kind, row in sorted(by_row, key=lambda kind_row: row_key(*kind_row)):
            slots = by_row[kind, row]
            entries = "".join(
                f"<td>{_html(_case_text(slots[c], judged.get(id(slots[c]))))}</td>"
                if c in slots
                else "<td>—</td>"
                for c in columns
            )
            rows.append(f"<tr><td>{_html(kernel)}</td><td>{_html(row)}</td>{entries}</tr>")
    return (
        f"<details><summary>{_html(chapter)}: every case</summary><table>"
        f"<tr><th>kernel</th><th>case</th>{head}</tr>{''.join(rows)}</table></details>"
    )


def _ab_order(
    listed: tuple[Cell, ABComparison],
) -> tuple[int, float, str, tuple[tuple[int, int, str], ...]]:
    """Listed A/Bs: by judgement (AB_LISTED's order), the largest change first within one."""
    cell, ab = listed
    return (
        AB_LISTED.index(ab.judgement),
        -abs((ab.ratio or 1.0) - 1.0),
        cell.classname,
        natural_key(cell.name),
    )


def _cause(verdict: Verdict) -> str:
    """Whose doing a cross-run SLOWER is, and what confirms it: only the same-GPU A/B can."""
    if verdict.same_code:
        return "the code is the baseline's (the same code identity): the environment, not the code"
    changed = (
        "no code identity to tell code from environment"
        if verdict.same_code is None
        else "the code changed"
    )
    if why := unconfirmed(verdict):
        return f"{changed}; unconfirmed: {why}"
    ab = verdict.cell.ab
    return f"{changed}; its A/B: {describe_ab(ab)}" if ab else changed
