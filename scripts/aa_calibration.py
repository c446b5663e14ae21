"""A/A calibration of the same-GPU A/B gate (issue #39): identical code timed against itself, as
`ab --all` times it, each case's comparison kept; then, by duration bucket, how often the
default thresholds call identical code SLOWER, the distribution of the A/A ratios, and the
threshold each bucket would need for at most 0.1 % false SLOWER. And the other side of the
gate: a planted 2 % slowdown of a case >= 50 us, timed against its base many times, and how
often it is found.

    python scripts/aa_calibration.py run sm_90a --budget-s 500 --out aa        # on a GPU box
    python scripts/aa_calibration.py repeat sm_90a --repeats 40 --budget-s 500 --out aa
    python scripts/aa_calibration.py planted sm_90a --repeats 100 --out aa
    python scripts/aa_calibration.py summarize aa/aa-sm_90a.jsonl --planted \
        aa/planted-sm_90a.jsonl --out docs/reports/h200/aa

`run` runs `ab --all` over and over: it needs the target's `test` report in --reports (it runs
`test` first where there is none), and times the project's own tree against itself
(`ab --base-tree .`): no git needed. `repeat` does what `ab --all` does for each case (both
sides set up and checked by `ab`'s own code, harness.run.paired.ready_pair, then timed in `ab`'s
rounds and judged by `ab`'s rule), in this process, and times each case `--repeats` times
(fewer where a case's comparisons pass `--case-budget-s`) before it frees its buffers: the
setup of a case, most of an `ab` run's time, is paid once for many comparisons. `planted` times
tests/fixtures/slowdown_2pct's head against its base the same way. Each comparison is appended
to `<out>/aa-<target>.jsonl` (`planted-<target>.jsonl`) as it is made, numbered on from the
runs kept there, so a run cut short keeps what it measured.
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import json
import math
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.model.codec import report_from_json  # noqa: E402
from harness.model.outcome import CellKind  # noqa: E402
from harness.report.verdict import ab_threshold_pct  # noqa: E402

PLANTED = ROOT / "tests" / "fixtures" / "slowdown_2pct"  # base/ and head/ kernel trees
# Base medians, in µs: where each bucket ends (the last is open)
BUCKET_ENDS_US = (10.0, 20.0, 50.0, 200.0, 1000.0, math.inf)  # 20, 50: the gate's bands
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
    how: str = "ab --all"  # or "in-process": `repeat` and `planted`


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


def repeat(
    target_name: str,
    base_root: Path,
    head_root: Path,
    kept: Path,
    repeats: int,
    case_budget_s: float,
    budget_s: float,
) -> int:
    """Each case of the kernels both trees hold (by chapter, kernel and case name), set up and
    checked once as `ab` does, then timed against itself (or the head's build against the
    base's) until `kept` holds `repeats` such comparisons of it, or its comparisons this run
    pass `case_budget_s`; cases go on while `budget_s` lasts. Each comparison is appended to
    `kept` as it is made."""
    from harness.compile.nvcc import Compiler
    from harness.compile.toolchain import find_toolchain
    from harness.model.discovery import kernel_folders, load_kernel
    from harness.model.matrix import load_matrix
    from harness.report.verdict import judge_paired
    from harness.run.case import GpuRuntime
    from harness.run.device import probe
    from harness.run.paired import Side, ready_pair

    matrix = load_matrix(ROOT / "matrix.yaml")
    target = matrix.targets[target_name]
    runtime = GpuRuntime(probe(matrix), matrix.timer)
    compiler = Compiler(find_toolchain(), ROOT / ".cache" / "compile")
    kept.parent.mkdir(parents=True, exist_ok=True)
    before = read([kept]) if kept.exists() else []
    run = 1 + max((c.run for c in before), default=-1)
    # cases already compared in this way, to bring each up to `repeats`: a run cut short is
    # taken up again where it stopped
    had = Counter((c.classname, c.case) for c in before if c.how == "in-process")
    heads = {folder.classname: folder for folder in kernel_folders(head_root)}
    started, count = time.monotonic(), 0

    def side(folder, name: str) -> tuple[Any, Any] | None:
        kernel = load_kernel(folder)
        if not target.expresses(kernel.declared.requires):
            return None  # needs what the target cannot emit: `test` skips it
        if any(c.defines for c in kernel.spec.cases):
            return None  # builds by case macros: `ab --all` times those
        try:
            built = compiler.compile(kernel, target)
        except Exception as error:  # refused: `test` says why
            print(f"aa: {kernel.classname} ({name}): not compiled: {error}", flush=True)
            return None
        if built.binary is None:
            return None
        return kernel, runtime.module(built.binary, target, kernel.spec.context)

    if target.runs_on(runtime.info.cc) is None:
        raise SystemExit(f"aa: {target_name} does not run on {runtime.info.name}")
    for folder in kernel_folders(base_root):
        if folder.classname not in heads:
            continue
        base = side(folder, "base")
        head = base if heads[folder.classname] == folder else side(heads[folder.classname], "head")
        if base is None or head is None:
            continue
        head_cases = {case.name: case for case in head[0].spec.cases}
        for case in base[0].spec.cases:
            if time.monotonic() - started > budget_s:
                return count
            wanted = repeats - had[base[0].classname, case.name]
            if case.name not in head_cases or wanted <= 0:
                continue
            try:
                with ready_pair(
                    runtime,
                    Side(base[0], case, base[1]),
                    Side(head[0], head_cases[case.name], head[1]),
                ) as pair:
                    began = time.monotonic()
                    for _ in range(wanted):
                        timing = pair.timed(matrix.ab)
                        assert timing.base_median_us and timing.head_median_us
                        threshold = ab_threshold_pct(
                            min(timing.base_median_us, timing.head_median_us)
                        )
                        ratio, low, high, judgement = judge_paired(timing.ratios, threshold)
                        found = Comparison(
                            run, base[0].classname, case.name, timing.base_median_us, ratio, low,
                            high, threshold, judgement.value, len(timing.ratios), "in-process",
                        )  # fmt: skip
                        with kept.open("a") as lines:
                            lines.write(_line(found) + "\n")
                        count += 1
                        if time.monotonic() - began > case_budget_s:
                            break
            except Exception as error:  # a case this GPU cannot set up, or a check it fails
                print(f"aa: {base[0].classname}::{case.name}: {error}", flush=True)
    return count


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
    largest_low: float  # the largest lower end: what a threshold calling none SLOWER exceeds
    slower_now: int  # SLOWER at the harness's thresholds now (by the base median)

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
                largest_low=lows[-1],
                slower_now=sum(
                    c.low > 1 + ab_threshold_pct(c.base_median_us) / 100 for c in inside
                ),
            )
        )
    return found


def quantile(ordered: Sequence[float], q: float) -> float:
    """The q-quantile of sorted values, linearly between the nearest two."""
    at = q * (len(ordered) - 1)
    below = math.floor(at)
    above = min(below + 1, len(ordered) - 1)
    return ordered[below] + (ordered[above] - ordered[below]) * (at - below)


def summary_lines(found: Sequence[Bucket], total: int, runs: Mapping[str, int]) -> list[str]:
    """The A/A table; `runs`: how many runs of each kind (`ab --all`, in-process) made it."""
    made = " and ".join(f"{n} {how} runs" if how == "in-process" else f"{n} `{how}` runs"
                        for how, n in sorted(runs.items()))  # fmt: skip
    lines = [
        f"{total} A/A comparisons from {made} (identical code timed against itself, "
        "interleaved); the goal is at most 0.1 % called SLOWER.",
        "",
        "| base median | comparisons | SLOWER (false) | FASTER | AMBIGUOUS | threshold used | "
        "ratio p0.1 / p50 / p99.9 | threshold for <= 0.1 % | largest lower end | "
        "SLOWER at today's threshold |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    start = "0"
    for b in found:
        q = b.ratio_quantiles
        end = "" if math.isinf(b.below_us) else f"{b.below_us:g}"
        lines.append(
            f"| {start}-{end} µs | {b.count} | {b.slower} ({100 * b.false_slower:.2f} %) | "
            f"{b.faster} | {b.ambiguous} | {b.threshold_pct:.2f} % | "
            f"{q['p0.1']:.4f} / {q['p50']:.4f} / {q['p99.9']:.4f} | {b.needed_pct:.2f} % | "
            f"{b.largest_low:.4f} | {b.slower_now} |"
        )
        start = end
    return lines


@dataclass(frozen=True)
class Planted:
    """A planted slowdown timed against its base, many times: how often the gate found it, at
    the default threshold and at the one its bucket's A/A comparisons need."""

    count: int
    slower: int  # at the default threshold
    slower_at_needed: int  # intervals wholly above the bucket's needed threshold
    needed_pct: float
    base_median_us: tuple[float, float]  # the least and the largest
    ratio_median: float
    lowest_low: float


def planted(comparisons: Sequence[Comparison], found: Sequence[Bucket]) -> Planted | None:
    if not comparisons:
        return None
    medians = sorted(c.base_median_us for c in comparisons)
    bucket = next(b for b in BUCKET_ENDS_US if medians[len(medians) // 2] < b)
    needed = next((b.needed_pct for b in found if b.below_us == bucket), 0.0)
    return Planted(
        count=len(comparisons),
        slower=sum(c.judgement == "SLOWER" for c in comparisons),
        slower_at_needed=sum(c.low > 1 + needed / 100 for c in comparisons),
        needed_pct=needed,
        base_median_us=(medians[0], medians[-1]),
        ratio_median=statistics.median(c.ratio for c in comparisons),
        lowest_low=min(c.low for c in comparisons),
    )


def planted_lines(found: Planted) -> list[str]:
    low, high = found.base_median_us
    return [
        "",
        f"A planted 2 % slowdown (tests/fixtures/slowdown_2pct, base median {low:.1f}-"
        f"{high:.1f} µs), timed against its base {found.count} times: SLOWER {found.slower} "
        f"times at the default threshold; its interval wholly above its bucket's threshold "
        f"for <= 0.1 % ({found.needed_pct:.2f} %) {found.slower_at_needed} times. Median "
        f"ratio {found.ratio_median:.4f}, lowest interval end {found.lowest_low:.4f}.",
    ]


def histogram_svg(comparisons: Sequence[Comparison], width: int = 640, height: int = 320) -> str:
    """The A/A ratios (log scale of counts) per duration bucket, as an SVG of polylines."""
    edges = [0.97 + 0.0015 * i for i in range(41)]  # 0.97 .. 1.03
    colours = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b")
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
        text = gzip.decompress(path.read_bytes()).decode() if path.suffix == ".gz" else None
        for line in (text if text is not None else path.read_text()).splitlines():
            if line.strip():
                found.append(Comparison(**json.loads(line)))
    return found


def summarize(paths: Sequence[Path], planted_paths: Sequence[Path], out: Path) -> None:
    comparisons = read(paths)
    runs = Counter(
        how for how, _ in {(c.how, (path, c.run)) for path in paths for c in read([path])}
    )
    found = buckets(comparisons)
    lines = summary_lines(found, len(comparisons), runs)
    slowdown = planted(read(planted_paths), found)
    if slowdown is not None:
        lines += planted_lines(slowdown)
    out.mkdir(parents=True, exist_ok=True)
    text = "\n".join(lines) + "\n"
    (out / "aa-summary.md").write_text(text)
    (out / "aa-ratios.svg").write_text(histogram_svg(comparisons))
    data: dict[str, Any] = {
        "buckets": [{**asdict(b), "false_slower": b.false_slower} for b in found],
        "planted": asdict(slowdown) if slowdown else None,
    }
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
    for name, repeats, case_budget_s in (("repeat", 40, 5.0), ("planted", 100, 600.0)):
        repeating = commands.add_parser(name)
        repeating.add_argument("target")
        repeating.add_argument("--out", type=Path, default=ROOT / "aa")
        repeating.add_argument("--budget-s", type=float, default=500.0)
        repeating.add_argument("--repeats", type=int, default=repeats)
        repeating.add_argument("--case-budget-s", type=float, default=case_budget_s)
    summing = commands.add_parser("summarize")
    summing.add_argument("jsonl", type=Path, nargs="+")
    summing.add_argument("--planted", type=Path, nargs="*", default=[])
    summing.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.command != "summarize":
        from harness.model.matrix import load_matrix

        targets = load_matrix(ROOT / "matrix.yaml").targets
        if args.target not in targets:
            raise SystemExit(f"aa: no target {args.target!r} in matrix.yaml ({', '.join(targets)})")
    if args.command == "run":
        run(args.target, args.reports, args.out, args.budget_s)
    elif args.command in ("repeat", "planted"):
        trees = (ROOT / "kernels",) * 2
        if args.command == "planted":
            trees = (PLANTED / "base", PLANTED / "head")
        kept = args.out / f"{'aa' if args.command == 'repeat' else 'planted'}-{args.target}.jsonl"
        count = repeat(args.target, *trees, kept, args.repeats, args.case_budget_s, args.budget_s)
        print(f"aa: {count} comparisons appended to {kept}", flush=True)
    else:
        summarize(args.jsonl, args.planted, args.out)


if __name__ == "__main__":
    main(sys.argv[1:])
