"""What the timer's stopping rule (harness.run.timer.StopRule, with matrix.yaml's `timing:`)
would have done to kept runs: each timed cell's samples replayed in the order they were taken,
stopped where the rule says, and the median so reached set against the whole run's.

    python scripts/stop_rule_replay.py docs/reports/h200/column/stop-rule/old-*.json.gz

By duration band, it prints how many of the samples the rule keeps and how far its medians fall
from the recorded ones (p50, p99, largest). Given several runs, it prints beside that how far
each run's medians fall from the median of the runs' (p50, p90, p99): what the timing moves by
anyway, which a stopping rule should stay well within. A cell timed on a shared GPU is left out.
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.model.cell import Report  # noqa: E402
from harness.model.codec import report_from_json  # noqa: E402
from harness.model.errors import ReportError  # noqa: E402
from harness.model.matrix import MatrixError, TimerSettings, load_matrix  # noqa: E402
from harness.run.timer import StopRule  # noqa: E402

BANDS_US = ((20.0, "below 20 us"), (float("inf"), "20 us and up"))


@dataclass(frozen=True)
class Replayed:
    name: tuple[str, str]  # kernel, case
    recorded: int  # samples the run took
    kept: int  # samples the rule takes of them
    median_us: float  # the run's
    replayed_us: float  # the median of the samples the rule takes

    @property
    def change_pct(self) -> float:
        return 100.0 * abs(self.replayed_us / self.median_us - 1.0)


def read_report(path: Path) -> Report:
    """The report at `path`; SystemExit naming it where it is missing or not a report."""
    try:
        raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
        return report_from_json(json.loads(raw), path)
    except ReportError as error:  # its message names the file
        raise SystemExit(f"stop_rule_replay: {error}") from error
    except (OSError, ValueError) as error:  # missing, not gzip, not JSON
        raise SystemExit(f"stop_rule_replay: {path}: not a readable report ({error})") from error


def replay(report: Report, settings: TimerSettings) -> list[Replayed]:
    """Each timed cell of `report`, its samples replayed through the rule (at most those the
    run took: a run its budget stopped cannot be replayed past that)."""
    replayed = []
    for cell in report.cells:
        timing = cell.timing
        if timing is None or timing.shared_gpu or not timing.samples_us:
            continue
        rule, kept = StopRule(settings), 0
        for kept, sample in enumerate(timing.samples_us, start=1):  # noqa: B007
            if rule.enough(sample):
                break
        replayed.append(
            Replayed(
                (cell.kernel, cell.case),
                len(timing.samples_us),
                kept,
                timing.median_us,
                statistics.median(timing.samples_us[:kept]),
            )
        )
    return replayed


def band_of(median_us: float) -> str:
    return next(name for below, name in BANDS_US if median_us < below)


def _quantile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def summary(replays: Sequence[Replayed]) -> list[str]:
    lines = []
    for _, band in BANDS_US:
        mine = [r for r in replays if band_of(r.median_us) == band]
        if not mine:
            continue
        changes = [r.change_pct for r in mine]
        kept = sum(r.kept for r in mine) / sum(r.recorded for r in mine)
        lines.append(
            f"{band}: {len(mine)} cells, {kept:.1%} of their samples kept; the median moved "
            f"{_quantile(changes, 0.5):.3f} % (p50), {_quantile(changes, 0.99):.3f} % (p99), "
            f"{max(changes):.3f} % at most"
        )
    return lines


def spread(reports: Sequence[Report]) -> list[str]:
    """How far each run's medians fall from the median of all the runs', by band."""
    medians: dict[tuple[str, str], list[float]] = {}
    for report in reports:
        for cell in report.cells:
            if cell.timing is not None and not cell.timing.shared_gpu:
                medians.setdefault((cell.kernel, cell.case), []).append(cell.timing.median_us)
    lines = []
    for _, band in BANDS_US:
        moved = [
            100.0 * abs(value / statistics.median(values) - 1.0)
            for values in medians.values()
            if len(values) == len(reports) and band_of(statistics.median(values)) == band
            for value in values
        ]
        if moved:
            lines.append(
                f"{band}: the runs' medians differ from their median by "
                f"{_quantile(moved, 0.5):.3f} % (p50), {_quantile(moved, 0.9):.3f} % (p90), "
                f"{_quantile(moved, 0.99):.3f} % (p99)"
            )
    return lines


def main(argv: Sequence[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("reports", type=Path, nargs="+", help="report JSON, .json or .json.gz")
    parser.add_argument("--matrix", type=Path, default=ROOT / "matrix.yaml")
    args = parser.parse_args(argv)
    try:
        settings = load_matrix(args.matrix).timer
    except MatrixError as error:  # its message says file:line
        raise SystemExit(f"stop_rule_replay: {error}") from error
    reports = [read_report(path) for path in args.reports]
    replays = [one for report in reports for one in replay(report, settings)]
    print(
        f"the rule: {settings.max_samples} samples at most; noise <= "
        f"{settings.noise_target_pct} % from {settings.min_samples}; the median within "
        f"{settings.median_within_pct} % from {settings.median_min_samples}"
    )
    print("\n".join(summary(replays)))
    if len(reports) > 1:
        print("\n".join(spread(reports)))


if __name__ == "__main__":
    main(sys.argv[1:])
