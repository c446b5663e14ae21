"""Command line: `python -m harness test sm_90a`, `python -m harness compile`,
`python -m harness sanitize sm_90a`.

Exit status: 0 when no cell failed or errored, 1 when one did, 2 when the matrix itself is
unusable (the message names the file and line) or the kernel trees and -k select no kernel.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

from harness.build.matrix import MatrixError, load_matrix
from harness.build.toolchain import ToolchainError, find_toolchain
from harness.commands.sanitize import SanitizeOptions, sanitize_target
from harness.commands.stage import NothingToRun, RunResult
from harness.commands.test import RunOptions, run_target
from harness.provenance import current_commit
from harness.result import Outcome
from harness.run.device import NoDevice, probe, probe_all
from harness.run.sanitizer import SanitizerMissing, find_compute_sanitizer

ROOT = Path(__file__).resolve().parent.parent


def main(argv: list[str] | None = None) -> int:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--matrix", type=Path, default=ROOT / "matrix.yaml")
    common.add_argument(
        "--kernels",
        type=Path,
        action="append",
        help="a kernels tree (repeatable; default: the project's kernels/)",
    )
    common.add_argument("--reports", type=Path, default=ROOT / "reports")
    common.add_argument("--cache", type=Path, default=ROOT / ".cache" / "compile")
    common.add_argument("-k", dest="select", default="", help="only kernels whose name has this")
    common.add_argument("--runner", default="", help="runner name for the report's suite")
    parser = argparse.ArgumentParser(prog="python -m harness", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    test = commands.add_parser("test", parents=[common], help="compile and run one target")
    test.add_argument("target", help="a target name (sm_90a) or its session name (sm90)")
    sanitize = commands.add_parser(
        "sanitize", parents=[common], help="compile one target, run compute-sanitizer over it"
    )
    sanitize.add_argument("target", help="a target name (sm_90a) or its session name (sm90)")
    build = commands.add_parser("compile", parents=[common], help="compile, run nothing")
    build.add_argument("targets", nargs="*", help="default: every target")
    report = commands.add_parser("report", help="merge reports; summary, dashboard, history")
    report.add_argument("files", nargs="*", type=Path, help="default: reports/junit-*.xml")
    report.add_argument("--matrix", type=Path, default=ROOT / "matrix.yaml")
    report.add_argument("--out", type=Path, default=ROOT / "reports")
    report.add_argument("--db", type=Path, default=ROOT / "reports" / "history.sqlite")
    report.add_argument("--commit", default="", help="default: git rev-parse HEAD")
    report.add_argument("--baseline", help="a stored commit to compare medians with")
    report.add_argument("--max-slowdown", type=float, help="fail when SLOWER by more (%%)")
    report.add_argument("--strict", action="store_true", help="fail when a kernel never ran")
    report.add_argument(
        "--artifacts",
        type=Path,
        help="a folder of reports-<target>/ folders (CI's artifacts), each of its target only",
    )
    args = parser.parse_args(argv)
    if args.command == "report":
        return _report(args)

    try:
        matrix = load_matrix(args.matrix)
        if args.command in ("test", "sanitize"):
            targets = [matrix.target(args.target)]
        else:
            targets = [matrix.target(name) for name in args.targets] or list(
                matrix.targets.values()
            )
    except MatrixError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2

    try:
        toolchain = find_toolchain()
        print(f"nvcc {toolchain.version} ({toolchain.origin}: {toolchain.nvcc})")
    except ToolchainError as error:
        toolchain = error
        print(f"error: {error}", file=sys.stderr)
    execute = args.command != "compile"
    if args.command == "sanitize":
        device = probe(matrix)
        _print_device(device)
        return _sanitize(args, matrix, targets[0], toolchain, device)
    devices = probe_all(matrix) if execute else NoDevice("compile only")
    if execute:
        _print_device(devices)

    commit = current_commit(ROOT)
    ok = True
    for target in targets:
        options = RunOptions(
            target=target,
            kernels_roots=tuple(args.kernels or [ROOT / "kernels"]),
            reports_dir=args.reports,
            cache_dir=args.cache,
            execute=execute,
            select=args.select,
            runner=args.runner,
            commit=commit,
        )
        try:
            result = run_target(matrix, options, toolchain, devices)
        except NothingToRun as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
        _print_summary(result)
        ok &= result.ok
    return 0 if ok else 1


def _sanitize(args, matrix, target, toolchain, device) -> int:
    try:
        sanitizer = find_compute_sanitizer(toolchain)
        print(f"compute-sanitizer: {sanitizer}")
    except SanitizerMissing as error:
        sanitizer = error
        if isinstance(device, NoDevice):  # nothing would run under it anyway
            print(f"compute-sanitizer: none ({error})")
        else:
            print(f"error: {error}", file=sys.stderr)
    options = SanitizeOptions(
        target=target,
        kernels_roots=tuple(args.kernels or [ROOT / "kernels"]),
        reports_dir=args.reports,
        cache_dir=args.cache,
        select=args.select,
        runner=args.runner,
        commit=current_commit(ROOT),
    )
    tools = ", ".join(tool.value for tool in matrix.sanitize.tools)
    print(f"sanitize: {tools} over each kernel's smallest case")
    try:
        result = sanitize_target(matrix, options, toolchain, device, sanitizer)
    except NothingToRun as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    _print_summary(result)
    return 0 if result.ok else 1


def _report(args) -> int:
    try:
        from harness.report.publish import PublishOptions, publish
    except ModuleNotFoundError as missing:  # a --no-venv environment without the report's needs
        print(
            f"error: report needs the Python package {missing.name!r}, which is not installed "
            "here: pip install -r requirements.txt (or run nox -s report)",
            file=sys.stderr,
        )
        return 2
    from harness.report.summary import headline

    try:
        matrix = load_matrix(args.matrix)
    except MatrixError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    artifact_of: dict[Path, str] = {}
    if args.artifacts:  # every report in reports-<target>/ must be of that target
        for folder in sorted(args.artifacts.glob("reports-*")):
            for xml in sorted(folder.glob("*.xml")):
                artifact_of[xml] = folder.name.removeprefix("reports-")
    if args.artifacts:  # an empty artifacts folder is no reason to read stale local reports
        files = args.files or list(artifact_of)
    else:
        files = args.files or sorted((ROOT / "reports").glob("junit-*.xml"))
    options = PublishOptions(
        reports=files,
        expected_targets=list(matrix.targets),
        out=args.out,
        database=args.db,
        commit=args.commit or current_commit(ROOT) or "unknown",
        baseline=args.baseline,
        max_slowdown_pct=args.max_slowdown,
        strict=args.strict,
        artifact_targets=artifact_of,
        device_peaks=dict(matrix.devices),
    )
    published = publish(options)
    for line in headline(published.report_set, published.verdicts):
        print(line)
    for path in published.files:
        print(f"wrote {path}")
    for remark in published.remarks:
        print(f"warning: {remark}", file=sys.stderr)
    for failure in published.failures:
        print(f"error: {failure}", file=sys.stderr)
    return 1 if published.failures else 0


def _print_device(found) -> None:
    if isinstance(found, NoDevice):
        print(f"device: none ({found.reason}); run cells are skipped no-device")
        return
    for device in found if isinstance(found, list) else [found]:
        print(f"device {device.ordinal}: {device.name}, CC {device.cc}, driver {device.driver}")


def _print_summary(result: RunResult) -> None:
    if result.compiled == 0 and result.cached:
        print(f"compile: nothing to do, {result.cached} binaries cached")
    else:
        print(f"compile: {result.compiled} compiled, {result.cached} cached")
    for cell in result.cells:
        mark = cell.outcome.value.upper()
        line = f"  {mark:8} {cell.classname}::{cell.name}"
        if cell.timing:
            line += f"  {cell.timing.median_us:.1f} us"
            rate = cell.throughput
            if rate and rate.tflops is not None:
                line += f"  {rate.tflops:.2f} TFLOPS"
            if rate and rate.gbytes_per_s is not None:
                line += f"  {rate.gbytes_per_s:.1f} GB/s"
            if rate and rate.roofline_pct is not None:
                line += f"  {rate.roofline_pct:.1f}% of roofline"
            line += f"  [{cell.binary}]"
        elif cell.outcome is not Outcome.PASSED:
            line += f"  -- {cell.message}"
        print(line)
    counts = Counter(cell.outcome.value for cell in result.cells)
    reasons = Counter(cell.skip_reason.value for cell in result.cells if cell.skip_reason)
    summary = ", ".join(f"{counts.get(o.value, 0)} {o.value}" for o in Outcome)
    detail = ", ".join(f"{n} {r}" for r, n in sorted(reasons.items()))
    print(f"{result.files.xml.name}: {summary}" + (f" ({detail})" if detail else ""))
    if result.report.wall_s is not None:
        print(_time_split(result))


def _time_split(result: RunResult) -> str:
    """Where the run's wall time went: the cells' stages summed, beside the whole."""
    stages = [cell.stages for cell in result.cells if cell.stages]
    split = ", ".join(
        f"{name} {sum(getattr(s, f'{name}_s') for s in stages):.1f} s"
        for name in ("setup", "reference", "verify", "timing")
    )
    compile_s = sum(cell.seconds for cell in result.cells if cell.case == "compile")
    return f"time: wall {result.report.wall_s:.1f} s; compile {compile_s:.1f} s; {split}"


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # Ctrl-C: one line, not a traceback; the reports say how far
        print("interrupted: the reports hold the cells finished so far", file=sys.stderr)
        sys.exit(130)
