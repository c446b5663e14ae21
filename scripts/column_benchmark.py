"""How long one target's column takes on this GPU box, as the README's command runs it, and where
the time goes (issue #39's 15 s column): `nox --no-venv -s test-<session>` run after run, with
`timing.lanes` set to each value asked, the first run cold (the compile cache as it is), the
rest warm and interleaved across the lane settings, so a drift of the machine favours none.

    python scripts/column_benchmark.py sm90 --lanes 1 2 --runs 2 --out bench

Every run writes its reports into one folder, `<out>/reports`, each replacing the last's as the
README's command replaces `reports/` (a run orders its cases by what they took in the report it
replaces: a warm run is one that has that report), and copies them to `<out>/<lanes>-<n>/`;
`<out>/column.md` and `column.json` hold, per run, the command's wall time, the report's own,
the cells' outcomes, the timed cells' samples and timing loops (their `timing.wall_s` summed:
the time the GPU was held alone for timing) and the harness's stage split
(harness.pipeline.console.time_split). A run's matrix is matrix.yaml with only `timing.lanes`
changed, written beside its copy.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.model.codec import report_from_json  # noqa: E402
from harness.model.matrix import load_matrix  # noqa: E402
from harness.pipeline.console import time_split  # noqa: E402


@dataclass(frozen=True)
class ColumnRun:
    lanes: int
    run: int  # 0 is the cold one
    command_s: float  # the nox command, start to end
    report_wall_s: float  # the harness's own (the report's wall_s)
    outcomes: dict[str, int]
    time_split: str
    samples: int  # the timed cells' samples, all told
    timing_loops_s: float  # the timed cells' timing.wall_s, summed: the GPU held alone


def with_lanes(matrix_text: str, lanes: int) -> str:
    """matrix.yaml's text with `timing.lanes` set to `lanes`, nothing else changed."""
    if re.search(r"^  lanes: *\d+ *$", matrix_text, flags=re.M):
        return re.sub(r"^  lanes: *\d+ *$", f"  lanes: {lanes}", matrix_text, flags=re.M)
    return re.sub(r"^timing:\n", f"timing:\n  lanes: {lanes}\n", matrix_text, flags=re.M)


def one_run(session: str, target: str, lanes: int, run: int, out: Path) -> ColumnRun:
    folder = out / f"{lanes}-{run}"
    folder.mkdir(parents=True, exist_ok=True)
    matrix = folder / "matrix.yaml"
    matrix.write_text(with_lanes((ROOT / "matrix.yaml").read_text(), lanes))
    if load_matrix(matrix).timer.lanes != lanes:
        raise SystemExit(f"{matrix}: timing.lanes is not {lanes}")
    reports = out / "reports"
    command = ["nox", "--no-venv", "-s", f"test-{session}", "--"]
    command += ["--matrix", str(matrix), "--reports", str(reports)]
    started = time.monotonic()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    took = time.monotonic() - started
    (folder / "log.txt").write_text(done.stdout + done.stderr)
    for name in (f"junit-{target}.json", f"junit-{target}.xml"):
        shutil.copyfile(reports / name, folder / name)
    report = report_from_json(json.loads((folder / f"junit-{target}.json").read_text()), folder)
    timings = [cell.timing for cell in report.cells if cell.timing is not None]
    return ColumnRun(
        lanes,
        run,
        round(took, 2),
        float(report.wall_s or 0.0),
        dict(Counter(cell.outcome.value for cell in report.cells)),
        time_split(report),
        sum(len(timing.samples_us) for timing in timings),
        round(sum(timing.wall_s for timing in timings), 3),
    )


def table(runs: Sequence[ColumnRun]) -> list[str]:
    lines = [
        "| lanes | run | nox wall | harness wall | cells | samples | timing loops | time split |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in runs:
        cells = ", ".join(f"{n} {o}" for o, n in sorted(r.outcomes.items()))
        which = "cold" if r.run == 0 else f"warm {r.run}"
        lines.append(
            f"| {r.lanes} | {which} | {r.command_s:.1f} s | {r.report_wall_s:.1f} s | {cells} | "
            f"{r.samples:,} | {r.timing_loops_s:.2f} s | {r.time_split.removeprefix('time: ')} |"
        )
    for lanes in sorted({r.lanes for r in runs}):
        warm = [r.command_s for r in runs if r.lanes == lanes and r.run > 0]
        if warm:
            lines.append(f"\nlanes {lanes}: warm nox wall median {statistics.median(warm):.1f} s")
    return lines


def main(argv: Sequence[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("session", help="the target's session name: sm90")
    parser.add_argument("--lanes", type=int, nargs="+", default=[2])
    parser.add_argument("--runs", type=int, default=2, help="warm runs per lane setting")
    parser.add_argument("--out", type=Path, default=ROOT / "bench")
    args = parser.parse_args(argv)
    matrix = load_matrix(ROOT / "matrix.yaml")
    named = [t.name for t in matrix.targets.values() if t.session == args.session]
    if not named:
        sessions = ", ".join(sorted(t.session for t in matrix.targets.values()))
        raise SystemExit(f"column_benchmark: no target's session is {args.session!r} ({sessions})")
    (target,) = named
    runs = [one_run(args.session, target, args.lanes[0], 0, args.out)]
    for run in range(1, args.runs + 1):
        runs += [one_run(args.session, target, lanes, run, args.out) for lanes in args.lanes]
    lines = table(runs)
    (args.out / "column.md").write_text("\n".join(lines) + "\n")
    (args.out / "column.json").write_text(json.dumps([asdict(r) for r in runs], indent=1) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main(sys.argv[1:])
