"""How the dashboard copes with a big matrix: the kept H200 reports as if from 50 runners (about
23,000 cells), rendered, then loaded in headless Chromium. Prints render and load times.

    python scripts/bench_dashboard.py [runners]
"""

from __future__ import annotations

import dataclasses
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from playwright.sync_api import sync_playwright  # noqa: E402

from harness.model.matrix import load_matrix  # noqa: E402
from harness.report.dashboard import render_dashboard  # noqa: E402
from harness.report.merge import ReportSet, load_reports  # noqa: E402

H200 = sorted((ROOT / "docs" / "reports" / "h200").glob("junit-*.xml"))


def many_runners(count: int) -> ReportSet:
    kept = load_reports(H200, ["sm_80", "sm_90a", "sm_100a"])
    reports = []
    for n in range(count):
        for report in kept.reports:
            where = dataclasses.replace(report.provenance, runner=f"runner-{n:02d}")
            cells = [dataclasses.replace(c, provenance=where) for c in report.cells]
            reports.append(dataclasses.replace(report, provenance=where, cells=cells))
    return ReportSet(reports=reports, sources=list(H200))


def main(count: int) -> None:
    report_set = many_runners(count)
    started = time.perf_counter()
    page_text = render_dashboard(report_set, {}, [], load_matrix(ROOT / "matrix.yaml").devices)
    rendered = time.perf_counter() - started
    with tempfile.TemporaryDirectory() as folder, sync_playwright() as playwright:
        out = Path(folder) / "dashboard.html"
        out.write_text(page_text)
        chromium = shutil.which("chromium") or shutil.which("chromium-browser")
        browser = playwright.chromium.launch(
            executable_path=chromium, args=["--no-sandbox", "--disable-gpu"]
        )
        page = browser.new_page(viewport={"width": 1600, "height": 1000})
        started = time.perf_counter()
        page.goto(out.as_uri(), wait_until="load")
        page.locator("#visible-count").wait_for()
        loaded = time.perf_counter() - started
        started = time.perf_counter()
        page.select_option("#filter-outcome", "skipped")
        filtered = time.perf_counter() - started
        browser.close()
    size_mb = len(page_text.encode()) / 1e6
    print(
        f"{len(report_set.cells)} cells, {size_mb:.1f} MB: rendered in {rendered:.1f} s, "
        f"loaded in {loaded:.1f} s, filtered in {filtered:.2f} s"
    )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 50)
