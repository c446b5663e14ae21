"""The dashboard: escaping and styles as text, then the real page in a headless Chromium.

The browser test skips when no Chromium is installed, unless MATRIX_REQUIRE_BROWSER=1, where it
fails instead. It keeps screenshots at tests/artifacts/dashboard.png (the first screen) and
dashboard-full.png (the whole page).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
from pathlib import Path

import pytest

from harness.model.cell import ABComparison, CarriedFrom, Cell, Judgement, Report, Timing
from harness.model.matrix import load_matrix
from harness.model.outcome import Outcome, SkipReason
from harness.report.dashboard import render_dashboard
from harness.report.junit import properties_of
from harness.report.merge import ReportSet, load_reports
from harness.report.verdict import BaseTiming, judge

ROOT = Path(__file__).resolve().parent.parent
H200 = ROOT / "tests" / "fixtures" / "h200"
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
NASTY = "<script>alert('x')</script> & \"quoted\" </script><!--"


def _h200() -> ReportSet:
    return load_reports(sorted(H200.glob("junit-*.xml")), ["sm_80", "sm_90a", "sm_100a"])


def _cell(**changes) -> Cell:
    """A passed sm_90a run cell of the H200 reports, with `changes` (robust to new fields)."""
    base = next(c for c in _h200().cells if c.target == "sm_90a" and c.median_us)
    defaults = {
        "chapter": "reduce",
        "kernel": "warp_sum",
        "case": "4096",
        "timing": Timing(12.5, 12.0, 13.0, 3.3, (12.0, 12.5, 13.0)),
    }
    return dataclasses.replace(base, **{**defaults, **changes})


def _set(cells: list[Cell], **fields) -> ReportSet:
    """The cells as the reports of one runner, one per target."""
    reports: dict[str, Report] = {}
    for cell in cells:
        suite = f"cuda-matrix.{cell.target}.{cell.runner}"
        reports.setdefault(cell.target, Report(suite, cell.target, cell.provenance))
        reports[cell.target].cells.append(cell)
    return ReportSet(reports=list(reports.values()), **fields)


def _cell_tags(page: str) -> list[str]:
    return re.findall(r'<div class="cell [^>]*>', page)


def test_text_from_reports_is_escaped_in_grid_header_and_data():
    report_set = _set(
        [
            _cell(
                kernel="k<b>",
                case="big&small",
                outcome=Outcome.FAILED,
                message=NASTY,
                detail=NASTY,
                loaded_as=NASTY,
            )
        ],
        problems=[f"junit-x.xml: {NASTY}"],
        missing_targets=["sm_<100>"],
    )
    page = render_dashboard(report_set, {("sm_90a@vm", "reduce.k<b>", "big&small[sm_90a]"): []})
    assert "<script>alert" not in page
    assert "k<b>" not in page and "big&small" not in page
    assert "k&lt;b&gt;" in page  # the kernel row
    assert "big&amp;small" in page  # the case row
    assert "&lt;script&gt;alert" in page  # problems banner and cell tooltip
    assert "sm_&lt;100&gt;" in page
    assert page.count("</script>") == 2  # the JSON blob and the code, nothing from the data
    assert "<!--" not in page
    blob = re.search(r'<script type="application/json" id="cells-data">(.*?)</script>', page, re.S)
    records = json.loads(blob.group(1))
    assert records[0]["message"] == NASTY and records[0]["detail"] == NASTY
    assert records[0]["properties"]["binary"] == NASTY


def test_control_characters_from_reports_are_shown_not_sent():
    hostile = "bell\x07 esc\x1b[31m nul\x00 del\x7f"
    report_set = _set(
        [_cell(kernel=hostile, case=hostile, outcome=Outcome.FAILED, message=hostile)],
        problems=[f"junit-x.xml: {hostile}"],
    )
    page = render_dashboard(report_set, {})
    assert not re.search(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]", page)  # none is valid HTML
    assert "bell\\x07 esc\\x1b[31m nul\\x00 del\\x7f" in page  # the kernel row, as text
    blob = re.search(r'<script type="application/json" id="cells-data">(.*?)</script>', page, re.S)
    assert json.loads(blob.group(1))[0]["message"] == hostile  # the data itself kept whole


def test_skipped_cell_never_gets_the_passed_style():
    report_set = _set(
        [
            _cell(),
            _cell(
                target="sm_100a",
                outcome=Outcome.SKIPPED,
                skip_reason=SkipReason.NO_DEVICE,
                message="no-device: no CUDA device visible",
                timing=None,
                throughput=None,
            ),
        ]
    )
    passed, skipped = _cell_tags(render_dashboard(report_set, {}))
    assert "outcome-passed" in passed and 'data-outcome="passed"' in passed
    assert "outcome-skipped" in skipped and "reason-no-device" in skipped
    assert "passed" not in re.sub(r'title="[^"]*"', "", skipped)
    assert "skipped: no-device" in render_dashboard(report_set, {})


def test_missing_target_is_a_column_marked_missing_and_not_ok():
    report_set = _set([_cell()], missing_targets=["sm_100a"])
    page = render_dashboard(report_set, {})
    assert re.search(r'<th class="col missing" data-target="sm_100a">', page)
    assert 'class="slot missing"' in page
    assert 'class="status bad"' in page and "1 target(s) missing" in page
    assert 'id="missing"' in page


def test_never_ran_kernel_is_flagged():
    skipped = _cell(
        outcome=Outcome.SKIPPED, skip_reason=SkipReason.NO_DEVICE, timing=None, throughput=None
    )
    page = render_dashboard(_set([skipped]), {})
    assert 'id="never-ran"' in page and "reduce.warp_sum" in page
    assert '<span class="flag">never ran</span>' in page
    assert 'class="status ok"' not in page


# --- the page in a real browser ---------------------------------------------------------------


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return ""


@pytest.fixture(scope="module")
def browser():
    executable = _chromium()
    required = os.environ.get("MATRIX_REQUIRE_BROWSER") == "1"
    if not executable:
        message = "no chromium installed (apt-get install chromium)"
        if required:
            pytest.fail(f"MATRIX_REQUIRE_BROWSER=1 but {message}")
        pytest.skip(message)
    from playwright.sync_api import sync_playwright  # requirements-test.txt; never skipped

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


FAILING_MESSAGE = "wrong output: 3 of 2592 differ; first at [0, 7]: got 1.5 <expected 2.0> & more"


def test_dashboard_in_chromium(browser, tmp_path):
    report_set = _h200()
    assert not report_set.problems and report_set.cells
    # Counts come from the kept reports (they are refreshed now and then), not from constants.
    timed = next(
        c for c in report_set.cells if c.target == "sm_90a" and c.timing and c.timing.samples > 100
    )
    failing = dataclasses.replace(
        timed,
        case="made_up_case",
        outcome=Outcome.FAILED,
        message=FAILING_MESSAGE,
        seed=42,
        timing=None,
        throughput=None,
        vendor=None,
        detail='Traceback (most recent call last):\n  File "verify.py"\nAssertionError: <x>',
    )
    next(r for r in report_set.reports if r.target == "sm_90a").cells.append(failing)
    total = len(report_set.cells)
    n_skipped = sum(c.outcome is Outcome.SKIPPED for c in report_set.cells)
    n_sm80 = sum(c.target == "sm_80" for c in report_set.cells)
    assert n_skipped and n_sm80
    median = timed.timing.median_us
    trend_key = (timed.column, timed.classname, timed.name)
    history = [("a1b2c3d", 1.04), ("e4f5a6b", 1.02), ("0c9d8e7", 0.97), ("f00dfee", 1.01)]
    trends = {trend_key: [(run, median * factor) for run, factor in history]}
    out = tmp_path / "dashboard.html"
    out.write_text(
        render_dashboard(report_set, trends, [], load_matrix(ROOT / "matrix.yaml").devices)
    )

    page = browser.new_page(viewport={"width": 1500, "height": 1000})
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on("request", lambda r: r.url.startswith("file:") or errors.append(f"request {r.url}"))
    page.goto(out.as_uri())
    cells = page.locator("#grid .cell")
    assert cells.count() == total
    assert page.locator("#grid .cell:visible").count() == total
    assert page.locator("#grid th.col").count() == 3
    assert f"{total} cells" in page.locator("#counts").inner_text()
    assert "NOT OK" in page.locator("#status").inner_text()

    passed_bg = _background(page, '.cell[data-outcome="passed"]')
    skipped = page.locator('.cell[data-outcome="skipped"]').first
    assert _background(page, '.cell[data-outcome="skipped"]') != passed_bg
    assert skipped.inner_text().startswith("skipped: ")

    page.select_option("#filter-outcome", "skipped")
    visible = page.locator("#grid .cell:visible")
    assert visible.count() == n_skipped
    assert set(_attribute(visible, "data-outcome")) == {"skipped"}
    page.select_option("#filter-outcome", "")
    page.select_option("#filter-target", "sm_80")
    visible = page.locator("#grid .cell:visible")
    assert visible.count() == n_sm80
    assert set(_attribute(visible, "data-target")) == {"sm_80"}
    assert page.locator('#grid th.col[data-target="sm_90a"]').is_hidden()
    page.select_option("#filter-target", "")
    page.select_option("#filter-outcome", "failed")
    assert page.locator("#grid .cell:visible").count() == 1
    page.select_option("#filter-outcome", "")

    page.locator('.cell[data-outcome="failed"]').click()
    details = page.locator("#details")
    assert details.locator("#details-message").inner_text() == FAILING_MESSAGE
    assert "AssertionError: <x>" in details.locator("#details-log").inner_text()
    assert "failed" in details.locator("#details-outcome").inner_text()

    page.locator(f'.cell[data-index="{report_set.cells.index(timed)}"]').click()
    assert f"{timed.classname} {timed.name}" in details.locator("#details-title").inner_text()
    props = details.locator("#details-props")
    median_row = props.locator('tr[data-key="time_median_us"] td').inner_text()
    assert median_row == properties_of(timed)["time_median_us"]
    assert props.locator('tr[data-key="gbytes_per_s"]').count() == 1
    bars = details.locator("#details-hist rect")
    assert bars.count() > 5
    assert details.locator("#details-trend circle").count() == len(history)
    assert not errors, errors

    ARTIFACTS.mkdir(exist_ok=True)
    page.evaluate("window.scrollTo(0, 0)")
    page.mouse.move(0, 0)
    page.screenshot(path=str(ARTIFACTS / "dashboard.png"))  # header, grid top, details panel
    page.screenshot(path=str(ARTIFACTS / "dashboard-full.png"), full_page=True)
    assert (ARTIFACTS / "dashboard.png").stat().st_size > 10_000
    page.close()


def _attribute(locator, name: str) -> list[str]:
    return locator.evaluate_all(f"nodes => nodes.map(n => n.getAttribute('{name}'))")


def _background(page, selector: str) -> str:
    return page.eval_on_selector(
        selector, "e => getComputedStyle(e).backgroundImage + getComputedStyle(e).backgroundColor"
    )


def test_a_judged_cell_carries_its_verdict_to_the_details_panel():
    timed = _cell()
    baseline = dataclasses.replace(
        timed, timing=dataclasses.replace(timed.timing, median_us=10.0, samples_us=(10.0,) * 10)
    )
    verdict = judge(timed, BaseTiming.of(baseline.timing), same=True)
    page = render_dashboard(_set([timed]), {}, [verdict])
    blob = re.search(r'<script type="application/json" id="cells-data">(.*?)</script>', page, re.S)
    (record,) = json.loads(blob.group(1))
    assert record["verdict"]["judgement"] == "SLOWER" and record["verdict"]["same_code"]
    assert record["verdict"]["ratio"] == pytest.approx(1.25)


def test_a_verdict_on_a_shared_gpu_and_a_case_s_a_b_reach_the_grid_and_the_details():
    shared = _cell(
        timing=Timing(12.5, 12.0, 13.0, 3.3, (12.0, 12.5, 13.0), shared_gpu="pid 7 on GPU 0"),
        ab=ABComparison("f00dfeed" * 5, Judgement.NOT_RUN, why="the base <b>faulted</b>"),
    )
    baseline = dataclasses.replace(
        shared, timing=Timing(10.0, 10.0, 10.0, 0.0, (10.0,) * 10), ab=None
    )
    page = render_dashboard(
        _set([shared]), {}, [judge(shared, BaseTiming.of(baseline.timing), same=False)]
    )
    assert '<span class="verdict gpu-shared">GPU shared 1.250</span>' in page
    blob = re.search(r'<script type="application/json" id="cells-data">(.*?)</script>', page, re.S)
    assert "<b>" not in blob.group(1)  # escaped inside the script element
    (record,) = json.loads(blob.group(1))
    assert record["verdict"]["slug"] == "gpu-shared"
    assert record["verdict"]["shared_gpu"] == "this run: pid 7 on GPU 0"
    assert record["ab"] == {
        "judgement": "NOT_RUN",
        "slug": "not-run",
        "base_commit": "f00dfeed" * 5,
        "text": "NOT_RUN: the base <b>faulted</b>",
    }


def test_a_timed_cell_shows_the_clock_of_its_samples_and_the_throttled_ones():
    throttled = Timing(12.5, 12.0, 13.0, 3.3, (12.0, 12.5, 13.0), 1400, 0.1, 3)
    page = render_dashboard(_set([_cell(timing=throttled)]), {}, [])
    blob = re.search(r'<script type="application/json" id="cells-data">(.*?)</script>', page, re.S)
    (record,) = json.loads(blob.group(1))
    assert record["properties"]["sm_clock_mhz"] == "1400"
    assert record["properties"]["throttled_samples"] == "3"


def test_a_carried_cell_shows_where_its_verdict_was_reached():
    origin = CarriedFrom("0123456789abcdef" * 2 + "01234567", "h200", "2026-12-03", "s")
    page = render_dashboard(_set([_cell(timing=None, carried_from=origin)]), {}, [])
    assert "carried 0123456789" in page
    blob = re.search(r'<script type="application/json" id="cells-data">(.*?)</script>', page, re.S)
    (record,) = json.loads(blob.group(1))
    assert record["properties"]["carried_from_commit"] == origin.commit


def test_a_roofline_point_opens_its_cell_and_charts_escape_their_text(browser, tmp_path):
    report_set = _h200()
    peaks = load_matrix(ROOT / "matrix.yaml").devices
    gemm = next(
        c for c in report_set.cells if c.kernel == "wgmma_ws_gemm" and c.target == "sm_90a"
        and c.throughput and c.throughput.tflops
    )  # fmt: skip
    index = report_set.cells.index(gemm)
    half = dataclasses.replace(
        gemm.throughput,
        tflops=gemm.throughput.tflops / 3,
        gbytes_per_s=gemm.throughput.gbytes_per_s / 3,
    )
    nasty = dataclasses.replace(gemm, case=NASTY, throughput=half)  # a point of its own
    next(r for r in report_set.reports if r.target == "sm_90a").cells.append(nasty)
    page_text = render_dashboard(report_set, {}, [], peaks)
    assert "<script>alert" not in page_text
    out = tmp_path / "dashboard.html"
    out.write_text(page_text)
    page = browser.new_page(viewport={"width": 1600, "height": 1000})
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(out.as_uri())
    captions = page.locator("#charts figcaption").all_inner_texts()
    assert "sm_90a on NVIDIA H200: roofline" in captions
    assert "sm_90a on NVIDIA H200: bandwidth" in captions
    assert "kernel against its vendor baseline" in captions
    best = max(
        (c for c in report_set.cells if c.target == "sm_90a" and c.throughput
         and c.throughput.gbytes_per_s and c.throughput.tflops is None),
        key=lambda c: c.throughput.gbytes_per_s,
    )  # fmt: skip
    measured = page.locator('#charts .roofline[data-target="sm_90a"] .roof.measured title')
    assert measured.text_content() == (
        f"best measured {best.throughput.gbytes_per_s:.0f} GB/s ({best.kernel} {best.case})"
    )
    point = page.locator(f'#charts .roofline circle[data-index="{index}"]')
    assert point.count() == 1
    point.click()
    title = page.locator("#details-title").inner_text()
    assert f"{gemm.classname} {gemm.name}" in title
    assert point.evaluate("n => n.classList.contains('selected')")
    bar = page.locator("#charts .vendor rect.bar").first
    bar.click()
    clicked = report_set.cells[int(bar.get_attribute("data-index"))]
    assert f"{clicked.classname} {clicked.name}" in page.locator("#details-title").inner_text()
    assert not errors, errors
    page.close()


@pytest.mark.parametrize("width", [1024, 1600])
def test_the_grid_fills_the_width_and_every_column_shows(browser, tmp_path, width):
    out = tmp_path / "dashboard.html"
    out.write_text(render_dashboard(_h200(), {}))
    page = browser.new_page(viewport={"width": width, "height": 900})
    page.goto(out.as_uri())
    assert page.evaluate("document.documentElement.scrollWidth") <= width  # no sideways page
    last = page.locator('#grid th.col[data-target="sm_100a"]').bounding_box()
    details = page.locator("#details").bounding_box()
    assert last["x"] + last["width"] <= details["x"]  # the last column, whole, beside the panel
    grid = page.locator("#grid").bounding_box()
    assert grid["width"] + details["width"] >= 0.9 * (width - 50)  # no empty gap beside them
    page.close()


def test_the_details_say_where_a_cell_ran_in_words(browser, tmp_path):
    skipped = _cell(outcome=Outcome.SKIPPED, skip_reason=SkipReason.NO_DEVICE, timing=None)
    no_gpu = dataclasses.replace(
        skipped, provenance=dataclasses.replace(skipped.provenance, device=None)
    )
    out = tmp_path / "dashboard.html"
    out.write_text(render_dashboard(_set([_cell(), no_gpu]), {}))
    page = browser.new_page()
    page.goto(out.as_uri())
    page.locator('.cell[data-index="1"]').click()
    assert page.locator("#details .where").inner_text() == "sm_90a on vm, no GPU"
    page.locator('.cell[data-index="0"]').click()
    assert page.locator("#details .where").inner_text() == "sm_90a on vm, GPU: NVIDIA H200"
    page.close()


def test_a_cell_s_trend_shows_both_stored_runs_its_baseline_and_verdict(browser, tmp_path):
    from harness.report.history import History

    history = History(tmp_path / "history.sqlite")
    history.record(_h200(), "base1234")
    kept = H200 / "junit-sm_90a.xml"
    sidecar = json.loads(kept.with_suffix(".json").read_text())
    at = next(
        i for i, c in enumerate(sidecar["cells"]) if c["timing"] and c["timing"]["median_us"] > 100
    )
    timing = sidecar["cells"][at]["timing"]  # slower by 10 %, every sample
    timing["median_us"] *= 1.10
    timing["samples_us"] = [v * 1.10 for v in timing["samples_us"]]
    shutil.copy(kept, tmp_path / kept.name)
    (tmp_path / kept.name).with_suffix(".json").write_text(json.dumps(sidecar))
    now = load_reports([tmp_path / kept.name], ["sm_90a"])
    report = now.reports[0]
    history.record(now, "next5678")
    verdicts = history.compare(now, "base1234").verdicts
    trends = history.trends()
    history.close()
    out = tmp_path / "dashboard.html"
    out.write_text(render_dashboard(now, trends, verdicts))
    page = browser.new_page(viewport={"width": 1600, "height": 1000})
    page.goto(out.as_uri())
    page.locator(f'.cell[data-index="{now.cells.index(report.cells[at])}"]').click()
    trend = page.locator("#details-trend")
    assert trend.locator("circle").count() == 2  # the baseline's run and this one
    assert trend.locator("#details-trend-baseline").count() == 1
    assert trend.locator("#details-trend-verdict").text_content() == "SLOWER 1.100"
    grid_cell = page.locator(f'.cell[data-index="{now.cells.index(report.cells[at])}"]')
    assert grid_cell.locator(".verdict.slower").inner_text() == "SLOWER 1.100"  # seen in the grid
    assert page.locator("#grid .verdict").count() == 1  # the SAME cells carry no mark
    page.close()


def test_count_pills_follow_the_filters_and_a_hidden_cell_leaves_the_panel(browser, tmp_path):
    report_set = _h200()
    out = tmp_path / "dashboard.html"
    out.write_text(render_dashboard(report_set, {}))
    page = browser.new_page(viewport={"width": 1600, "height": 1000})
    page.goto(out.as_uri())
    passed = page.locator('#counts [data-count="passed"] b')
    assert passed.inner_text() == str(sum(c.outcome is Outcome.PASSED for c in report_set.cells))
    page.select_option("#filter-target", "sm_100a")
    in_sm100 = [c for c in report_set.cells if c.target == "sm_100a"]
    assert passed.inner_text() == str(sum(c.outcome is Outcome.PASSED for c in in_sm100))
    page.select_option("#filter-target", "")
    first_sm80 = next(i for i, c in enumerate(report_set.cells) if c.target == "sm_80")
    page.locator(f'.cell[data-index="{first_sm80}"]').click()
    assert page.locator("#details-title").count() == 1
    page.select_option("#filter-target", "sm_90a")
    assert page.locator("#details-title").count() == 0
    assert "hidden by the filters" in page.locator("#details").inner_text()
    page.close()


def test_the_nvcc_command_wraps_inside_the_log_box(browser, tmp_path):
    report_set = _h200()
    compiled = next(i for i, c in enumerate(report_set.cells) if c.case == "compile" and c.detail)
    out = tmp_path / "dashboard.html"
    out.write_text(render_dashboard(report_set, {}))
    page = browser.new_page(viewport={"width": 1600, "height": 1000})
    page.goto(out.as_uri())
    page.locator(f'.cell[data-index="{compiled}"]').click()
    log = page.locator("#details-log")
    assert "nvcc" in log.inner_text()
    assert log.evaluate("n => n.scrollWidth <= n.clientWidth")  # nothing hidden off to the side
    page.close()


def test_the_page_carries_each_cell_s_samples_as_bins_with_the_tail_apart():
    from harness.report.dashboard import _histogram

    samples = [10.0 + 0.01 * (i % 50) for i in range(500)] + [95.0]  # one preempted launch
    binned = _histogram(samples)
    assert binned["samples"] == 501 and binned["clipped"] == 1 and binned["largest"] == 95.0
    assert sum(binned["counts"]) == 500 and len(binned["counts"]) == 23  # ceil(sqrt(500))
    assert binned["low"] == 10.0 and binned["high"] < 95.0
    assert _histogram([]) is None


def test_cases_named_like_junit_names_stay_their_own_rows():
    page = render_dashboard(_set([_cell(case="x[1]"), _cell(case="x[2]")]), {})
    rows = re.findall(r'<th class="case">(.*?)</th>', page)
    assert rows == ["x[1]", "x[2]"]


def test_a_column_no_runner_could_run_is_marked_compiled_only():
    page = render_dashboard(_h200(), {})
    header = re.search(r'<th class="col" data-target="sm_100a">.*?</th>', page, re.S).group(0)
    assert "compiled and inspected only: no runner here has a GPU for it" in header
    sm90 = re.search(r'<th class="col" data-target="sm_90a">.*?</th>', page, re.S).group(0)
    assert "compiled and inspected only" not in sm90


def test_a_page_of_more_cells_than_it_lists_shows_those_that_did_not_pass_and_says_so(
    monkeypatch,
):
    monkeypatch.setattr("harness.report.dashboard.LISTED_CELLS", 3)
    passed = [_cell(case=f"n{i}") for i in range(5)]
    broken = [_cell(case="bad", outcome=Outcome.FAILED, message="wrong")]
    page = render_dashboard(_set(passed + broken), {})
    blob = re.search(r'<script type="application/json" id="cells-data">(.*?)</script>', page, re.S)
    assert [r["name"] for r in json.loads(blob.group(1))] == ["bad[sm_90a]"]
    assert len(_cell_tags(page)) == 1
    assert "6 cells, more than this page lists (3): it lists the 1 that did not pass" in page
    assert '<span class="chip total">6 cells</span>' in page  # every cell still counted
    small = render_dashboard(_set(passed[:2] + broken), {})
    assert 'id="listed"' not in small and len(_cell_tags(small)) == 3
