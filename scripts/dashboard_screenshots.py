"""The screenshots under docs/: the dashboard over the kept H200 reports with two stored runs and
one regression, taken in headless Chromium.

The first stored run is reruns/r1 (sm_90a, d6e9040); the second is the kept top-level sm_90a
report (6a8c3e9) with the planted slowdown's cell (regression/slower) in place
of scale_bias n67108864_vec4, judged against the first. Every number is a measured one; the
composite is labelled as such in docs/reports.md.

    python scripts/dashboard_screenshots.py docs/
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from playwright.sync_api import sync_playwright  # noqa: E402

from harness.model.matrix import load_matrix  # noqa: E402
from harness.report.dashboard import render_dashboard  # noqa: E402
from harness.report.history import History  # noqa: E402
from harness.report.merge import load_reports  # noqa: E402
from tests.h200_runs import H200, write_kept  # noqa: E402  (9336b2d:docs/reports/h200's, frozen)

CASE = "n67108864_vec4"


def _composite(folder: Path) -> Path:
    """The kept sm_90a report with the planted slowdown's case and compile cells (its binary)
    in place of scale_bias's, written as a report of its own."""
    kept = H200 / "junit-sm_90a.xml"
    report = json.loads(kept.with_suffix(".json").read_text())
    slower = json.loads((H200 / "regression" / "slower" / "junit-sm_90a.json").read_text())
    for case in (CASE, "compile"):
        (planted,) = [
            c for c in slower["cells"] if c["kernel"] == "scale_bias" and c["case"] == case
        ]
        at = next(
            i for i, c in enumerate(report["cells"])
            if c["kernel"] == "scale_bias" and c["case"] == case
        )  # fmt: skip
        report["cells"][at] = planted
    shutil.copy(kept, folder / kept.name)
    (folder / kept.name).with_suffix(".json").write_text(json.dumps(report))
    return folder / kept.name


def main(out: Path) -> None:
    with tempfile.TemporaryDirectory() as folder:
        history = History(Path(folder) / "history.sqlite")
        history.record(
            load_reports([write_kept("reruns/r1/junit-sm_90a", Path(folder))], ["sm_90a"]),
            "d6e9040",
        )
        now = load_reports([_composite(Path(folder))], ["sm_90a"])
        (planted,) = [c for c in now.cells if c.kernel == "scale_bias" and c.case == CASE]
        history.record(now, "6a8c3e9")
        verdicts = history.compare(now, "d6e9040").verdicts
        trends = history.trends()
        history.close()
        page_text = render_dashboard(
            now, trends, verdicts, load_matrix(ROOT / "matrix.yaml").devices
        )
        html = Path(folder) / "dashboard.html"
        html.write_text(page_text)
        with sync_playwright() as playwright:
            chromium = shutil.which("chromium") or shutil.which("chromium-browser")
            browser = playwright.chromium.launch(
                executable_path=chromium, args=["--no-sandbox", "--disable-gpu"]
            )
            page = browser.new_page(viewport={"width": 1600, "height": 1100})
            page.goto(html.as_uri())
            page.locator(f'.cell[data-index="{now.cells.index(planted)}"]').click()
            page.screenshot(path=str(out / "dashboard-regression.png"))
            page.locator(
                f'.cell[data-index="{now.cells.index(planted)}"]'
            ).scroll_into_view_if_needed()
            page.screenshot(path=str(out / "dashboard-regression-cell.png"))
            browser.close()
    judged = [v for v in verdicts if v.judgement.value != "SAME"]
    for verdict in judged:
        print(
            verdict.cell.classname,
            verdict.cell.name,
            verdict.judgement.value,
            f"{verdict.ratio:.3f}",
        )


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs")
