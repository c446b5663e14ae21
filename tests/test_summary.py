"""summary.md: short enough for a pull request, in the matrix's order, escaped, and rendered by
GitHub's own renderer (cmark-gfm: tables, autolinks, strikethrough), raw HTML let through as
GitHub's renderer lets it through before its sanitizer, so the escaping alone is what is tested."""

from __future__ import annotations

import dataclasses
import html
import re

import cmarkgfm
import pytest

from harness.model.cell import (
    ABComparison,
    CarriedFrom,
    Cell,
    CompileFacts,
    Judgement,
    Provenance,
    Report,
    Timing,
)
from harness.model.outcome import CellKind, Outcome, SkipReason
from harness.report.merge import ReportSet, load_reports
from harness.report.summary import headline, natural_key, render_summary
from harness.report.verdict import BaseTiming, judge
from tests.conftest import ROOT

H200 = sorted((ROOT / "tests" / "fixtures" / "h200").glob("junit-*.xml"))
TARGETS = ["sm_80", "sm_90a", "sm_100a"]  # matrix.yaml's order


def _render(markdown: str) -> str:
    return cmarkgfm.github_flavored_markdown_to_html(
        markdown, options=cmarkgfm.Options.CMARK_OPT_UNSAFE
    )


def test_the_kept_reports_fit_in_sixty_lines_with_targets_in_matrix_order():
    summary = render_summary(load_reports(H200, TARGETS), targets=TARGETS)
    assert len(summary.splitlines()) <= 60
    page = _render(summary)
    (grid,) = re.findall(r"<table>.*?</table>", page.split("<details>")[0], re.S)
    header = re.findall(r"<th>(.*?)</th>", grid)
    assert header == ["kernel", "sm_80@vm", "sm_90a@vm", "sm_100a@vm"]
    rows = re.findall(r"<tr>(.*?)</tr>", grid, re.S)[1:]
    report_set = load_reports(H200, TARGETS)
    kernels = {c.classname for c in report_set.cells}
    chapters = {c.classname.split(".")[0] for c in report_set.cells}
    assert len(rows) == len(chapters) + len(kernels) == 3 + 26  # a row per chapter and kernel
    assert all(len(re.findall(r"<td>", row)) == 4 for row in rows)
    assert "<td>wgmma_ws_gemm</td>\n<td>⏭️ 4</td>\n<td>✅ 4</td>" in grid
    assert page.count("<details><summary>") == 3  # the per-case results, folded per chapter
    folded = page[page.index("<details>") :]
    assert "<td>scale_bias</td><td>n67108864_vec4</td>" in folded


def _cell(case: str, outcome=Outcome.PASSED, kernel: str = "k", **fields) -> Cell:
    """A cell of the kept reports as kernel `kernel`'s `case`: its compile cell, or a case's."""
    base = load_reports(H200, TARGETS).cells[0]
    fields.setdefault("kind", CellKind.COMPILE if case == "compile" else CellKind.CASE)
    fields.setdefault("timing", None)
    fields.setdefault("skip_reason", None)  # the kept cell's own: none unless the test says
    return dataclasses.replace(
        base, chapter="ch", kernel=kernel, case=case, target="sm_90a", outcome=outcome,
        tool=None, **fields,
    )  # fmt: skip


def _set(cells: list[Cell]) -> ReportSet:
    report = Report("cuda-matrix.sm_90a.vm", "sm_90a", cells[0].provenance, cells)
    return ReportSet(reports=[report], sources=[ROOT / "r.xml"])


NASTY = ["a|b", "line\nbreak", "<script>alert(1)</script>", "x[1]", "x[2]", "&amp"]


def test_case_and_kernel_names_render_as_text_and_stay_their_own_rows():
    cells = [_cell(name) for name in NASTY]
    cells.append(_cell("n1", Outcome.FAILED, kernel="bad|<b>", message="got <1> | want\n2"))
    page = _render(render_summary(_set(cells), targets=TARGETS))
    assert "<script>" not in page and "<b>" not in page
    folded = page[page.index("<details>") :]
    for name in ("x[1]", "x[2]", "a|b", "&lt;script&gt;alert(1)&lt;/script&gt;", "&amp;amp"):
        assert f"<td>{name}</td>" in folded, name  # each its own row, as text
    grid = page[: page.index("<details>")]
    rows = re.findall(r"<tr>(.*?)</tr>", grid.split("<table>")[1], re.S)
    assert all(len(re.findall(r"<t[dh]>", row)) == 2 for row in rows)  # no extra columns
    assert "got &lt;1&gt; | want 2" in page  # the failure, on one line, as text


HOSTILE = (
    "`tick` ``two`` [x](https://evil.example) <https://e.example> www.evil.example "
    "mail@evil.example *bold* _em_ ~~gone~~ a|b \x07bell \x1b[31mesc \x00nul"
)


@pytest.mark.parametrize("field", ["kernel", "case", "message", "runner"])
def test_text_a_spec_or_user_controls_stays_text_in_the_summary(field):
    """BEL, ESC, NUL, backticks, links, autolinks, emphasis and `|` in every field a kernel, its
    spec or its runner names: no link, no markup, no raw control character, one row."""
    fields = {"kernel": "k", "case": "n1", "message": "wrong", "runner": "vm"}
    fields[field] = HOSTILE
    where = Provenance(runner=fields["runner"])
    cell = Cell(
        CellKind.CASE, "ch", fields["kernel"], fields["case"], "sm_90a", where, Outcome.FAILED,
        message=fields["message"],
    )  # fmt: skip
    report = Report(f"cuda-matrix.sm_90a.{fields['runner']}", "sm_90a", where, [cell])
    page = _render(render_summary(ReportSet([report], [ROOT / "r.xml"]), targets=TARGETS))
    made = ("<a ", "<em>em", "<strong>bold", "<del>gone", "<https", "\x07", "\x1b", "\x00")
    for markup in made:
        assert markup not in page, markup
    shown = html.unescape(re.sub(r"<[^>]+>", "", page)).replace("\u200b", "")
    assert "\\x07bell \\x1b[31mesc \\x00nul" in shown  # control characters shown, not sent
    assert "[x](https://evil.example) <https://e.example> www.evil.example" in shown
    assert "mail@evil.example *bold* _em_ ~~gone~~ a|b" in shown
    if field in ("kernel", "case"):  # a name is one code span, whatever backticks it holds
        visible = HOSTILE.replace("\x07", "\\x07").replace("\x1b", "\\x1b").replace("\x00", "\\x00")
        spans = [html.unescape(span) for span in re.findall(r"<code>(.*?)</code>", page)]
        assert any(visible in span for span in spans), spans


def test_cases_sort_naturally_with_compile_first():
    names = ["n1000003", "n100", "compile", "n5"]
    page = render_summary(_set([_cell(n) for n in names]), targets=TARGETS)
    folded = page[page.index("<details>") :]
    order = [folded.index(f"<td>{name}</td>") for name in ("compile", "n5", "n100", "n1000003")]
    assert order == sorted(order)
    assert sorted(["k10", "k9", "k100"], key=natural_key) == ["k9", "k10", "k100"]


def test_kernels_that_never_ran_are_one_line_that_says_why():
    skipped = dict(outcome=Outcome.SKIPPED, skip_reason=SkipReason.NO_DEVICE)
    cells = [_cell("compile", kernel=k) for k in ("a", "b", "c")]
    cells += [_cell("n1", kernel=k, **skipped) for k in ("a", "b", "c")]
    summary = render_summary(_set(cells), targets=TARGETS)
    first, *rest = summary.splitlines()
    assert first == "# CUDA matrix: NO FAILURES, but kernels never ran"  # as the dashboard
    (line,) = [line for line in rest if "never ran" in line]
    assert line.startswith("- ⏭️ 3 kernels never ran on any runner, skipped no-device (3 cells)")


def test_the_never_ran_line_counts_its_cells_as_the_headline_does():
    """A target-unsupported kernel: its compile cell is skipped too, and counted in both."""
    unsupported = dict(outcome=Outcome.SKIPPED, skip_reason=SkipReason.TARGET_UNSUPPORTED)
    cells = [_cell(name, kernel="k", **unsupported) for name in ("compile", "n1", "n2")]
    cells += [_cell("compile", kernel="ran"), _cell("n1", kernel="ran")]
    summary = render_summary(_set(cells), targets=TARGETS)
    assert "(3 target-unsupported)" in summary.splitlines()[2]
    assert "skipped target-unsupported (3 cells)" in summary


@pytest.mark.parametrize(
    "outcomes", [[Outcome.PASSED] * 6, [Outcome.PASSED] * 5 + [Outcome.FAILED]]
)
def test_a_grid_cell_is_the_worst_outcome_and_its_count(outcomes):
    cells = [_cell(f"n{i}", outcome) for i, outcome in enumerate(outcomes)]
    summary = render_summary(_set(cells), targets=TARGETS)
    expected = "✅ 6" if Outcome.FAILED not in outcomes else "❌ 1/6"
    assert f"| k | {expected} |" in summary


def test_a_target_no_runner_could_run_says_it_was_compiled_and_inspected_only():
    summary = render_summary(load_reports(H200, TARGETS), targets=TARGETS)
    (line,) = [line for line in summary.splitlines() if "compiled and inspected only" in line]
    assert line.startswith("- ⏭️ `sm_100a@vm`: compiled and inspected only (")
    assert "run cells never ran: no runner of these reports has a GPU for that target" in line


def test_the_summary_and_the_dashboard_list_a_kernel_s_rows_by_kind_in_one_order():
    """The spec's cell, then compile, then the cases in natural order, then the sanitizer's."""
    from harness.report.dashboard import _chapters, _columns

    cells = [
        _cell("n10:memcheck", kind=CellKind.SANITIZER),
        _cell("n10"),
        _cell("n9"),
        _cell("compile"),
        _cell("spec", kind=CellKind.SPEC, outcome=Outcome.ERROR),
    ]
    cells[0] = dataclasses.replace(cells[0], case="n10", tool="memcheck")
    report_set = _set(cells)
    expected = ["spec", "compile", "n9", "n10", "n10:memcheck"]
    (chapter,) = _chapters(report_set, report_set.cells, _columns(report_set), {})
    (kernel,) = chapter["kernels"]
    assert [row["case"] for row in kernel["rows"]] == expected
    folded = render_summary(report_set)
    rows = re.findall(r"<tr><td>k</td><td>(.*?)</td>", folded)
    assert rows == expected


BASE = "0123456789abcdef" * 2  # the commit the A/Bs ran against


def _measured(judgement: Judgement, ratio: float) -> ABComparison:
    return ABComparison(
        BASE, judgement, ratio=ratio, low=ratio - 0.01, high=ratio + 0.01, threshold_pct=3.0,
        rounds=11, base_median_us=10.0, head_median_us=10.0 * ratio,
    )  # fmt: skip


def test_the_a_b_section_lists_what_is_not_same_with_its_numbers_or_why_and_the_counts():
    abs_ = {
        "n1": _measured(Judgement.SAME, 1.001),
        "n2": ABComparison(BASE, Judgement.IDENTICAL, why="the base's code identity"),
        "n3": _measured(Judgement.FASTER, 0.8),
        "n4": _measured(Judgement.SLOWER, 1.05),
        "n5": _measured(Judgement.SLOWER, 1.25),
        "n6": _measured(Judgement.AMBIGUOUS, 1.04),
        "n7": ABComparison(BASE, Judgement.NOT_RUN, why="the base faulted | <b>bad</b>\nhere"),
        "n8": ABComparison(BASE, Judgement.NEW, why="no such case at the base"),
    }
    report_set = _set([_cell(case, ab=ab) for case, ab in abs_.items()])
    (_, counts) = headline(report_set)
    assert counts == (
        "A/B against 0123456789: 1 SAME, 1 FASTER, 2 SLOWER, 1 AMBIGUOUS, 1 IDENTICAL, 1 NEW, "
        "1 NOT_RUN"
    )
    summary = render_summary(report_set, targets=TARGETS)
    section = summary.split("## A/B against 0123456789\n\n")[1].split("\n\n")[0]
    listed = [
        re.match(r"- `ch.k` `(n\d)\[sm_90a\]` on vm: (.*)", line) for line in section.splitlines()
    ]
    assert [m.group(1) for m in listed] == ["n5", "n4", "n6", "n3", "n7", "n8"]  # no n1, n2
    shown = {m.group(1): m.group(2) for m in listed}
    assert shown["n5"] == (
        "SLOWER, ratio 1.250 (95 % interval 1.240-1.260, threshold 3 %, 11 rounds), 10.0 → 12.5 µs"
    )
    assert shown["n8"] == "NEW: no such case at the base"
    page = _render(summary)
    assert "<b>" not in page  # the why is text, on its list item's one line
    assert (
        "<li><code>ch.k</code> <code>n7[sm_90a]</code> on vm: NOT_RUN: the base faulted | " in page
    )
    assert "&lt;b&gt;bad&lt;/b&gt; here</li>" in page
    folded = page[page.index("<details>") :]
    assert "A/B SLOWER 1.250" in folded and "A/B NOT_RUN" in folded and "A/B SAME" not in folded


def test_a_verdict_on_a_shared_gpu_is_counted_and_shown_as_such():
    timing = Timing(20.0, 19.9, 20.1, 0.1, (19.9, 20.0, 20.1), shared_gpu="pid 7 on GPU 0")
    now = _cell("n1", timing=timing)
    base = _cell("n1", timing=dataclasses.replace(timing, median_us=10.0, shared_gpu=None))
    verdict = judge(now, BaseTiming.of(base.timing), same=False)
    report_set = _set([now])
    (_, judged) = headline(report_set, [verdict])
    assert judged == "against the baseline: 0 SAME, 0 FASTER, 0 SLOWER, 0 AMBIGUOUS, 1 GPU shared"
    summary = render_summary(report_set, [verdict], targets=TARGETS)
    assert "Slower than the baseline" not in summary
    assert "· GPU shared 2.000" in summary


def test_a_slower_line_s_unconfirmed_why_is_escaped():
    timing = Timing(20.0, 19.9, 20.1, 0.1, (19.9, 20.0, 20.1))
    not_run = ABComparison(BASE, Judgement.NOT_RUN, why="nvcc | <i>died</i>")
    now = _cell("n1", timing=timing, ab=not_run)
    base = _cell("n1", timing=dataclasses.replace(timing, median_us=10.0, samples_us=(10.0,) * 3))
    summary = render_summary(
        _set([now]), [judge(now, BaseTiming.of(base.timing), same=False)], targets=TARGETS
    )
    slower = summary.split("## Slower than the baseline\n\n")[1]
    line = slower.splitlines()[0]
    assert line.endswith(
        "the code changed; unconfirmed: its A/B against 0123456789 is NOT_RUN: "
        "nvcc \\| &lt;i&gt;died&lt;/i&gt;)"
    )


def test_a_summary_of_a_huge_matrix_stays_a_page(monkeypatch):
    monkeypatch.setattr("harness.report.summary.LISTED_LINES", 2)
    monkeypatch.setattr("harness.report.summary.GRID_KERNELS", 1)
    monkeypatch.setattr("harness.report.summary.DETAILED_CELLS", 3)
    cells = [_cell(f"n{i}", Outcome.FAILED, kernel=f"k{i % 2}", message="wrong") for i in range(5)]
    summary = render_summary(_set(cells), targets=TARGETS)
    failures = summary.split("## Failures\n\n")[1].split("\n\n")[0].splitlines()
    assert len(failures) == 3
    assert failures[-1] == "- … and 3 more: the dashboard and merged.xml list them all"
    assert "… and 1 more kernels: the dashboard and merged.xml hold them" in summary
    assert "Per-case results: 5 cells, more than summary.md lists (3)" in summary
    assert "<details>" not in summary


def test_builds_without_a_code_identity_are_counted_saying_why():
    """Behind a cuobjdump the harness could not run, nothing tells code from environment."""
    built = CompileFacts(embedded="arch=compute_90a,code=sm_90a", binary_sha256="ab")
    log = "nvcc -o x.fatbin\ncode identity unavailable: cannot run /usr/local/bin/cuobjdump: gone"
    cells = [_cell("compile", kernel=k, compile=built, detail=log) for k in ("a", "b")]
    known = dataclasses.replace(built, code_identity="cd")
    cells += [_cell("compile", kernel="c", compile=known), _cell("n1", kernel="a")]
    (line,) = [line for line in render_summary(_set(cells)).splitlines() if "identity" in line]
    assert line == (
        "- ⚠️ code identity unknown for 2 kernels on sm_90a@vm: nothing tells unchanged code "
        "from changed, so an A/B times them rather than calling them IDENTICAL, and a slower "
        "verdict cannot blame the environment (cannot run /usr/local/bin/cuobjdump: gone)"
    )
    every = [dataclasses.replace(cell, compile=known) for cell in cells]
    assert "identity" not in render_summary(_set(every))


def test_a_carried_cell_counts_as_passed_and_says_from_where():
    origin = CarriedFrom("abcdef0123456789" * 2 + "abcdef01", "h200-1", "2026-12-01", "s")
    cells = [_cell("n1"), _cell("n2", carried_from=origin), _cell("n3", carried_from=origin)]
    first, *_ = headline(_set(cells))
    assert first.startswith("3 passed, ") and first.endswith(
        "; 2 of the passed carried from earlier runs, not launched"
    )
    summary = render_summary(_set(cells), targets=TARGETS)
    assert summary.count("carried from abcdef0123") == 2
