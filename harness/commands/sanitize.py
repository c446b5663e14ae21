"""One target's kernels under compute-sanitizer: each tool over each kernel's smallest case.

Every (kernel, tool) is one cell, `<case>[<target>]:<tool>`, and one process:
`compute-sanitizer --tool <tool> ... python -m harness.commands.sanitize <spec> <case> ...`, whose
child (the `__main__` below) runs the case once, untimed, and prints the case's own cell as one
JSON line (the result model's form). The tool's summary decides the cell; the case's outcome is
only its `case_outcome`, since a wrong value is no memory error. Runs go a few at a time, each
within `sanitize.timeout_s`, and the report is rewritten after each kernel.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from harness.build.kernels import BrokenKernel, Kernel, load_kernel
from harness.build.matrix import Matrix, Target, Tool, load_matrix
from harness.build.toolchain import Toolchain, ToolchainError
from harness.commands.stage import (
    NotRun,
    RunCell,
    RunResult,
    compile_stage,
    find_kernels,
    new_report,
    not_run_cell,
    provenance,
    report_stem,
    why_not_run,
)
from harness.processes import describe_exit, kill_group
from harness.provenance import runner_name
from harness.report import junit
from harness.result import Cell, Outcome, Provenance, SanitizerFindings, SkipReason
from harness.run import sanitizer as compute_sanitizer
from harness.run.device import DeviceInfo, NoDevice, probe
from harness.run.sanitizer import SanitizerMissing
from harness.spec import Case, KernelSpec

ROOT = Path(__file__).resolve().parents[2]  # where the case process imports the harness from
# Runs at once: each is a Python process plus the tool's instrumentation, mostly host work, with
# a CUDA context of its own on the one GPU. Half the cores, at most 8 contexts.
PARALLEL = max(1, min(8, (os.cpu_count() or 2) // 2))
LOG_CHARS = 20_000  # of a log kept in the cell: the findings lead it, the summary ends it
KILL_WAIT_S = 30  # for the pipes to close once a timed-out run is killed


@dataclass(frozen=True)
class SanitizeOptions:
    target: Target
    kernels_roots: tuple[Path, ...]  # each holds <chapter>/<kernel>/spec.py folders
    reports_dir: Path
    cache_dir: Path
    select: str = ""  # keep kernels whose <chapter>.<kernel> contains this
    runner: str = ""  # names the report's suite; defaults to the host name
    commit: str | None = None  # the project's commit the run is of


def smallest_case(spec: KernelSpec) -> Case:
    """The case with the least work (bytes + flops); ties keep the spec's order.

    A case whose work() needs what setup() derives on the device cannot be weighed here, and
    ranks after every case that can.
    """

    def weight(case: Case) -> tuple[int, int]:
        try:
            work = spec.work(case)
        except Exception:  # a param only setup() knows: unknown, not an error here
            return 1, 0
        return 0, work.bytes + work.flops

    return min(spec.cases, key=weight)


def sanitize_target(
    matrix: Matrix,
    options: SanitizeOptions,
    toolchain: Toolchain | ToolchainError,
    device: DeviceInfo | NoDevice,
    sanitizer: Path | SanitizerMissing,
) -> RunResult:
    target = options.target
    # Before any report is written: a run that selects nothing writes none.
    kernels = find_kernels(options.kernels_roots, options.select, matrix.timing.case_timeout_s)
    tools = matrix.sanitize.tools
    runner = runner_name(options.runner)
    files = junit.report_files(options.reports_dir, report_stem("sanitize", target, options.select))
    where = provenance(runner, options.commit, toolchain, device)
    report = new_report(
        f"cuda-matrix-sanitize.{target.name}.{runner}", target, where, toolchain, device
    )
    report.compute_sanitizer = str(sanitizer) if isinstance(sanitizer, Path) else None
    junit.write(files, report)  # unfinished and empty: a run killed now leaves no stale report

    def run_cells(kernel: Kernel) -> list[RunCell]:
        return [RunCell(smallest_case(kernel.spec).name, tool.value) for tool in tools]

    stage = compile_stage(
        target=target,
        kernels=kernels,
        toolchain=toolchain,
        cache_dir=options.cache_dir,
        where=where,
        run_cells=run_cells,
    )
    report.cells.extend(stage.cells)
    junit.write(files, report)
    with ThreadPoolExecutor(PARALLEL) as pool:
        # Every run is queued at once, so the pool stays busy across kernels; cells are taken
        # back in kernel order, and each kernel's are on disk before the next is awaited.
        queued: list[tuple[Kernel, NotRun | None, list[Future[Cell]]]] = []
        for kernel in stage.kernels:
            case = smallest_case(kernel.spec)
            build = stage.builds.get(kernel.classname)
            not_run = why_not_run(target, device, build)
            if not_run is None and isinstance(sanitizer, SanitizerMissing):
                not_run = NotRun(Outcome.ERROR, None, str(sanitizer))
            runs = []
            if not_run is None:
                for tool in tools:
                    run = _Run(sanitizer, tool, kernel, case, target, build.binary, device, where)
                    runs.append(pool.submit(_sanitize, run, matrix))
            queued.append((kernel, not_run, runs))
        for kernel, not_run, runs in queued:
            if not_run:
                for run_cell in run_cells(kernel):
                    report.cells.append(not_run_cell(kernel, run_cell, target, where, not_run))
            else:
                report.cells.extend(run.result() for run in runs)
            junit.write(files, report)
    report.finished = True
    junit.write(files, report)
    return RunResult(report, files, stage.fresh, stage.cached)


@dataclass(frozen=True)
class _Run:
    sanitizer: Path
    tool: Tool
    kernel: Kernel
    case: Case
    target: Target
    binary: Path
    device: DeviceInfo
    provenance: Provenance


@dataclass(frozen=True)
class Finished:
    """A process that ended, or was killed at its timeout (status None)."""

    status: int | None
    stdout: str
    stderr: str


def read_case_cell(stdout: str, target: str, where: Provenance) -> Cell | None:
    """The case process's cell, its last JSON line; None if it died before printing one."""
    lines = [line for line in stdout.splitlines() if line.startswith("{")]
    try:
        return Cell.from_json(json.loads(lines[-1]), target, where)
    except (IndexError, KeyError, TypeError, ValueError):  # a line cut short by a crash
        return None


def _sanitize(run: _Run, matrix: Matrix) -> Cell:
    cell = Cell(
        run.kernel.chapter,
        run.kernel.name,
        run.case.name,
        run.target.name,
        run.provenance,
        Outcome.ERROR,
        tool=run.tool.value,
    )
    case_process = [
        sys.executable,
        "-m",
        "harness.commands.sanitize",
        str(run.kernel.folder / "spec.py"),
        run.case.name,
        run.target.name,
        str(run.binary),
        "--matrix",
        str(matrix.path.resolve()),
        "--device",
        str(run.device.ordinal),
    ]
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path}
    timeout_s = matrix.sanitize.timeout_s
    with tempfile.TemporaryDirectory(prefix="sanitize-") as scratch:
        log_file = Path(scratch) / "compute-sanitizer.log"
        argv = compute_sanitizer.command(run.sanitizer, run.tool, log_file, case_process)
        started = time.monotonic()
        try:
            finished = _call(argv, env, timeout_s)
        except OSError as error:  # not an executable after all, or no room for a process
            cell.message = f"could not start {run.sanitizer}: {error}"
            return cell
        cell.seconds = time.monotonic() - started
        log = log_file.read_text(errors="replace") if log_file.is_file() else ""
    case = read_case_cell(finished.stdout, run.target.name, run.provenance)
    verdict = judge(run.tool, log, finished, timeout_s, case)
    cell.outcome, cell.message, cell.skip_reason = (
        verdict.outcome,
        verdict.message,
        verdict.skip_reason,
    )
    cell.sanitizer = verdict.findings
    cell.detail = _detail(log, finished)
    if case:  # the seed, and which binary path ran (sass, ptx-jit)
        cell.seed, cell.binary = case.seed, case.binary
    return cell


def _call(argv: list[str], env: dict[str, str], timeout_s: float) -> Finished:
    # A session of its own, so that a timeout takes the tool, the case process and whatever
    # helper the tool started, all at once.
    process = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        errors="replace",
        env=env,
        start_new_session=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=timeout_s)
        return Finished(process.returncode, stdout, stderr)
    except subprocess.TimeoutExpired:
        kill_group(process)
        try:
            stdout, stderr = process.communicate(timeout=KILL_WAIT_S)
        except subprocess.TimeoutExpired:  # something left the group and holds the pipes
            process.wait()
            stdout, stderr = "", ""
        return Finished(None, stdout, stderr)


@dataclass(frozen=True)
class Verdict:
    outcome: Outcome
    message: str
    skip_reason: SkipReason | None
    findings: SanitizerFindings


def judge(tool: Tool, log: str, finished: Finished, timeout_s: float, case: Cell | None) -> Verdict:
    """One run's verdict from what it left: the tool's log, the case's own cell, the exit."""
    found = compute_sanitizer.summary(tool, log)
    findings = SanitizerFindings(
        errors=found.errors if found else None,
        warnings=found.warnings if found and tool is Tool.RACECHECK else None,
        exit_status=finished.status,
        case_outcome=case.outcome if case else None,
        case_message=case.message if case else "",
    )

    def failed(message: str) -> Verdict:
        return Verdict(Outcome.FAILED, message, None, findings)

    headline = compute_sanitizer.first_finding(log)
    # The tool's complaints about its own command line, and the case process's traceback.
    complaint = (finished.stderr.strip().splitlines() or [""])[-1]
    if finished.status is None:
        return failed(f"timeout: no verdict after {timeout_s:g} s; killed")
    if found and found.errors:
        plural = "s" if found.errors > 1 else ""
        said = f": {headline}" if headline else ""
        return failed(f"{tool.value}: {found.errors} error{plural}{said}")
    if found is None:
        how = describe_exit(finished.status)
        if finished.status == compute_sanitizer.ERROR_EXIT:
            how += ", its code for errors found"
        said = f": {headline or complaint}" if headline or complaint else ""
        return failed(
            f"compute-sanitizer printed no {compute_sanitizer.summary_line(tool)} line "
            f"({how}){said}"
        )
    if case is None:
        why = complaint or describe_exit(finished.status)
        return failed(f"the case process reported nothing: {why}")
    if case.outcome is Outcome.SKIPPED:
        return Verdict(case.outcome, case.message, case.skip_reason, findings)
    if case.outcome is Outcome.ERROR:  # the spec broke: a clean log of half a case proves nothing
        return Verdict(Outcome.ERROR, f"the case broke: {case.message}", None, findings)
    return Verdict(Outcome.PASSED, "", None, findings)


def _detail(log: str, finished: Finished) -> str:
    text = log.strip()
    for stream, output in (("stdout", finished.stdout), ("stderr", finished.stderr)):
        if output.strip():
            text += f"\n--- {stream} of compute-sanitizer and the case process ---\n"
            text += output.strip()
    if len(text) <= LOG_CHARS:
        return text
    half = LOG_CHARS // 2
    cut = len(text) - 2 * half
    return f"{text[:half]}\n[... {cut} characters left out ...]\n{text[-half:]}"


def _case_main(argv: list[str] | None = None) -> int:
    """The case process: the case once, untimed, under whatever tool started this process."""
    parser = argparse.ArgumentParser(
        prog="python -m harness.commands.sanitize", description=__doc__
    )
    parser.add_argument("spec", type=Path, help="the kernel's spec.py")
    parser.add_argument("case", help="one of its case names")
    parser.add_argument("target", help="a target of the matrix")
    parser.add_argument("binary", type=Path, help="the kernel's build for that target")
    parser.add_argument("--matrix", type=Path, required=True)
    parser.add_argument("--device", type=int, default=0, help="the device ordinal")
    args = parser.parse_args(argv)
    matrix = load_matrix(args.matrix)
    device = probe(matrix, args.device)
    if isinstance(device, NoDevice):
        print(f"no CUDA device: {device.reason}", file=sys.stderr)
        return 2
    kernel = load_kernel(args.spec.resolve())
    if isinstance(kernel, BrokenKernel):  # the parent loaded it fine; it changed since
        print(kernel.reason, file=sys.stderr)
        return 2
    (case,) = [c for c in kernel.spec.cases if c.name == args.case]
    from harness.run.case import GpuRuntime  # cuda-python, where a device is known to exist

    runtime = GpuRuntime(device, matrix.timing)
    target = matrix.target(args.target)
    where = Provenance(runner="case-process")  # the parent's provenance replaces it
    cell, _ = runtime.run_case(kernel, case, target, args.binary, where, timed=False)
    print(json.dumps(cell.to_json()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(_case_main())
