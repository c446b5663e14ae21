"""How `report` copes with a big matrix: reports of CELLS cells in all (spread over runners of
sm_90a, each a report of up to 10,000 timed cells, all passed), merged, judged against a baseline of
the same cells and published. Prints the wall time and the peak memory of the `report` command.

    python scripts/bench_report.py [cells ...]      # default: 100000 1000000
"""

from __future__ import annotations

import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.model.cell import Cell, Provenance, Report, Timing  # noqa: E402
from harness.model.outcome import CellKind, Outcome  # noqa: E402
from harness.report import store  # noqa: E402

CELLS_PER_REPORT = 10_000
CASES_PER_KERNEL = 100


def write_reports(folder: Path, cells: int) -> list[Path]:
    """Reports of `cells` cells in all, one per runner."""
    files = []
    runners = -(-cells // CELLS_PER_REPORT)
    for runner in range(runners):
        where = Provenance(runner=f"runner-{runner:04d}", commit="f" * 40, device="NVIDIA H200")
        count = min(CELLS_PER_REPORT, cells - runner * CELLS_PER_REPORT)
        made = []
        for index in range(count):
            kernel, case = divmod(index, CASES_PER_KERNEL)
            median = 3.0 + (index % 997) * 0.5
            timing = Timing(median, median * 0.99, median * 1.01, 0.3, (median,) * 10)
            made.append(
                Cell(
                    CellKind.CASE, f"chapter{kernel % 7}", f"kernel{kernel:05d}", f"n{case}",
                    "sm_90a", where, Outcome.PASSED, seconds=0.01, timing=timing,
                )
            )  # fmt: skip
        report = Report(f"cuda-matrix.sm_90a.{where.runner}", "sm_90a", where, made)
        report.finished, report.wall_s = True, 1.0
        files.append(store.report_files(folder / where.runner, "junit-sm_90a").xml)
        store.write(store.report_files(folder / where.runner, "junit-sm_90a"), report)
    return files


def run_report(files: list[Path], out: Path, *extra: str) -> tuple[float, float, int]:
    """The `report` command's wall seconds, its peak resident memory (GB) and exit code."""
    command = [sys.executable, "-m", "harness", "report", *map(str, files), "--out", str(out)]
    started = time.perf_counter()
    done = subprocess.run([*command, *extra], cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - started
    peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    if done.returncode not in (0, 1):
        print(done.stderr[-2000:], file=sys.stderr)
    return wall, peak_kb / 1e6, done.returncode


def main(sizes: list[int]) -> None:
    for cells in sizes:
        with tempfile.TemporaryDirectory() as folder:
            work = Path(folder)
            started = time.perf_counter()
            files = write_reports(work / "reports", cells)
            made = time.perf_counter() - started
            db = work / "history.sqlite"
            first = run_report(files, work / "out", "--db", str(db), "--commit", "a" * 40)
            judged = run_report(
                files, work / "out", "--db", str(db), "--commit", "b" * 40, "--baseline", "a" * 7
            )
            page_mb = (work / "out" / "dashboard.html").stat().st_size / 1e6
            print(
                f"{cells} cells in {len(files)} reports (made in {made:.0f} s): report "
                f"{first[0]:.1f} s (exit {first[2]}), against a baseline {judged[0]:.1f} s "
                f"(exit {judged[2]}); peak memory {max(first[1], judged[1]):.2f} GB; "
                f"dashboard {page_mb:.1f} MB",
                flush=True,
            )


if __name__ == "__main__":
    main([int(arg) for arg in sys.argv[1:]] or [100_000, 1_000_000])
