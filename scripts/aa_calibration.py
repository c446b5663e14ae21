"""A/A calibration of the same-GPU A/B gate (issue #39): identical code timed against itself, as
`ab --all` times it, run after run, each case's comparison kept; then, by duration bucket, how
often the default thresholds call identical code SLOWER, the distribution of the A/A ratios,
and the threshold each bucket would need for at most 0.1 % false SLOWER.

    python scripts/aa_calibration.py run sm_90a --budget-s 500 --out aa      # on a GPU box
    python scripts/aa_calibration.py summarize aa/*.jsonl --out docs/reports/h200/aa

`run` needs the target's `test` report in --reports (it runs `test` first where there is
none), and times the project's own tree against itself (`ab --base-tree .`): no git needed.
Each `ab` run appends a line per measured case to `<out>/aa-<target>.jsonl`, numbered on from
the runs kept there; runs go on while the budget allows one more of the length of the longest
so far.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import statistics
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.model.codec import report_from_json  # noqa: E402
from harness.model.outcome import CellKind  # noqa: E402

# Base medians, in µs: where each bucket ends (the last is open)
BUCKET_ENDS_US = (10.0, 50.0, 200.0, 1000.0, math.inf)
GOAL = 0.001  # at most this share of A/A comparisons may be called SLOWER


@dataclass(frozen=True)
class Comparison:
    """One case's A/A: the base and head medians, the median ratio over rounds with its
    interval, the threshold it was judged against (%), and the judgement."""

    run: int
    classname: str
    case: str
    base_median_us: float
    ratio: float
    low: float
    high: float
    threshold_pct: float
    judgement: str
    rounds: int


def comparisons_of(report_json: dict, run: int) -> list[Comparison]:
    """The measured A/A comparisons of one `ab --all` run's report."""
    report = report_from_json(report_json, Path("ab report"))
    found = []
    for cell in report.cells:
        ab = cell.ab
        if cell.kind is not CellKind.CASE or ab is None or not ab.judgement.measured:
            continue
        assert ab.ratio is not None and ab.low is not None and ab.high is not None
        found.append(
            Comparison(
                run,
                cell.classname,
                cell.case,
                float(ab.base_median_us or 0.0),
                ab.ratio,
                ab.low,
                ab.high,
                float(ab.threshold_pct or 0.0),
                ab.judgement.value,
                ab.rounds,
            )
        )
    return found


def run(target: str, reports: Path, out: Path, budget_s: float) -> int:
    """`ab --all` over and over within `budget_s`; the comparisons kept as JSON lines."""
    out.mkdir(parents=True, exist_ok=True)
    report = reports / f"junit-{target}.json"
    harness = [sys.executable, "-m", "harness"]
    if not report.exists():
        subprocess.run([*harness, "test", target, "--reports", str(reports)], check=False)
    kept, started, longest = out / f"aa-{target}.jsonl", time.monotonic(), 0.0
    # runs append to what is kept there, numbered on from its last run
    count = 1 + max((c.run for c in read([kept])), default=-1) if kept.exists() else 0
    first = count
    while time.monotonic() - started + longest <= budget_s:
        began = time.monotonic()
        ab = [*harness, "ab", target, "--all", "--base-tree", ".", "--base-commit", "aa"]
        subprocess.run([*ab, "--reports", str(reports)], check=True, cwd=ROOT)
        longest = max(longest, time.monotonic() - began)
        found = comparisons_of(json.loads(report.read_text()), count)
        with kept.open("a") as lines:
            lines.writelines(_line(c) + "\n" for c in found)
        count += 1
        print(f"aa: run {count}: {len(found)} comparisons, {longest:.0f} s the longest", flush=True)
    return count - first


def _line(comparison: Comparison) -> str:
    """One comparison as a JSON line, its numbers to 7 significant digits (the samples' own
    resolution is coarser): the kept evidence stays small."""
    values = {
        key: float(f"{value:.7g}") if isinstance(value, float) else value
        for key, value in asdict(comparison).items()
    }
    return json.dumps(values, separators=(",", ":"))


@dataclass(frozen=True)
class Bucket:
    """The A/A comparisons of one duration range, and what they say of the gate."""

    below_us: float
    count: int
    slower: int
    faster: int
    ambiguous: int
    threshold_pct: float  # the median threshold the comparisons were judged against
    ratio_quantiles: dict[str, float]  # p0.1 .. p99.9 of the median ratios
    needed_pct: float  # the threshold that calls at most GOAL of them SLOWER

    @property
    def false_slower(self) -> float:
        return self.slower / self.count if self.count else 0.0


def buckets(comparisons: Sequence[Comparison]) -> list[Bucket]:
    """The comparisons by base median, each bucket's rates, quantiles and needed threshold:
    the (1 - GOAL) quantile of the intervals' lower ends, above 1, in %."""
    found = []
    start = 0.0
    for end in BUCKET_ENDS_US:
        inside = [c for c in comparisons if start <= c.base_median_us < end]
        start = end
        if not inside:
            continue
        ratios = sorted(c.ratio for c in inside)
        lows = sorted(c.low for c in inside)
        found.append(
            Bucket(
                below_us=end,
                count=len(inside),
                slower=sum(c.judgement == "SLOWER" for c in inside),
                faster=sum(c.judgement == "FASTER" for c in inside),
                ambiguous=sum(c.judgement == "AMBIGUOUS" for c in inside),
                threshold_pct=statistics.median(c.threshold_pct for c in inside),
                ratio_quantiles={
                    f"p{q:g}": quantile(ratios, q / 100) for q in (0.1, 1, 50, 99, 99.9)
                },
                needed_pct=max(0.0, 100 * (quantile(lows, 1 - GOAL) - 1)),
            )
        )
    return found


def quantile(ordered: Sequence[float], q: float) -> float:
    """The q-quantile of sorted values, linearly between the nearest two."""
    at = q * (len(ordered) - 1)
    below = math.floor(at)
    above = min(below + 1, len(ordered) - 1)
    return ordered[below] + (ordered[above] - ordered[below]) * (at - below)


def summary_lines(found: Sequence[Bucket], total: int, runs: int) -> list[str]:
    lines = [
        f"{total} A/A comparisons from {runs} `ab --all` runs (identical code timed against "
        "itself, interleaved); the goal is at most 0.1 % called SLOWER.",
        "",
        "| base median | comparisons | SLOWER (false) | FASTER | AMBIGUOUS | threshold used | "
        "ratio p0.1 / p50 / p99.9 | threshold for <= 0.1 % |",
        "|---|---|---|---|---|---|---|---|",
    ]
    start = "0"
    for b in found:
        q = b.ratio_quantiles
        end = "" if math.isinf(b.below_us) else f"{b.below_us:g}"
        lines.append(
            f"| {start}-{end} µs | {b.count} | {b.slower} ({100 * b.false_slower:.2f} %) | "
            f"{b.faster} | {b.ambiguous} | {b.threshold_pct:.2f} % | "
            f"{q['p0.1']:.4f} / {q['p50']:.4f} / {q['p99.9']:.4f} | {b.needed_pct:.2f} % |"
        )
        start = end
    return lines


def histogram_svg(comparisons: Sequence[Comparison], width: int = 640, height: int = 320) -> str:
    """The A/A ratios (log scale of counts) per duration bucket, as an SVG of polylines."""
    edges = [0.97 + 0.0015 * i for i in range(41)]  # 0.97 .. 1.03
    colours = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd")
    lines, start = [], 0.0
    for colour, end in zip(colours, BUCKET_ENDS_US, strict=True):
        ratios = [c.ratio for c in comparisons if start <= c.base_median_us < end]
        label = f"{start:g}-{'' if math.isinf(end) else f'{end:g}'} us (n={len(ratios)})"
        start = end
        if not ratios:
            continue
        counts = [sum(lo <= r < hi for r in ratios) for lo, hi in itertools.pairwise(edges)]
        top = math.log10(max(len(ratios), 1) + 1)
        points = " ".join(
            f"{40 + i * (width - 60) / (len(counts) - 1):.1f},"
            f"{height - 30 - (height - 60) * math.log10(n + 1) / top:.1f}"
            for i, n in enumerate(counts)
        )
        lines.append(f'<polyline fill="none" stroke="{colour}" points="{points}"/>')
        lines.append(
            f'<text x="{width - 200}" y="{20 + 14 * len(lines) // 2}" fill="{colour}" '
            f'font-size="11">{label}</text>'
        )
    axis = (
        f'<line x1="40" y1="{height - 30}" x2="{width - 20}" y2="{height - 30}" stroke="#000"/>'
        f'<text x="40" y="{height - 10}" font-size="11">0.97</text>'
        f'<text x="{width / 2 - 10:.0f}" y="{height - 10}" font-size="11">1.00</text>'
        f'<text x="{width - 50}" y="{height - 10}" font-size="11">1.03</text>'
        '<text x="40" y="14" font-size="11">A/A median ratio (head/base); counts, log scale</text>'
    )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}">'
        f"{axis}{''.join(lines)}</svg>\n"
    )


def read(paths: Iterable[Path]) -> list[Comparison]:
    found = []
    for path in paths:
        for line in path.read_text().splitlines():
            if line.strip():
                found.append(Comparison(**json.loads(line)))
    return found


def summarize(paths: Sequence[Path], out: Path) -> None:
    comparisons = read(paths)
    runs = len({(path, c.run) for path in paths for c in read([path])})
    found = buckets(comparisons)
    out.mkdir(parents=True, exist_ok=True)
    text = "\n".join(summary_lines(found, len(comparisons), runs)) + "\n"
    (out / "aa-summary.md").write_text(text)
    (out / "aa-ratios.svg").write_text(histogram_svg(comparisons))
    data = [{**asdict(b), "false_slower": b.false_slower} for b in found]
    (out / "aa-summary.json").write_text(json.dumps(data, indent=1, default=str) + "\n")
    print(text)


def main(argv: Sequence[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    running = commands.add_parser("run")
    running.add_argument("target")
    running.add_argument("--reports", type=Path, default=ROOT / "reports")
    running.add_argument("--out", type=Path, default=ROOT / "aa")
    running.add_argument("--budget-s", type=float, default=500.0)
    summing = commands.add_parser("summarize")
    summing.add_argument("jsonl", type=Path, nargs="+")
    summing.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.command == "run":
        run(args.target, args.reports, args.out, args.budget_s)
    else:
        summarize(args.jsonl, args.out)


if __name__ == "__main__":
    main(sys.argv[1:])
