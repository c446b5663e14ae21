"""One target's kernels under compute-sanitizer: each tool over each kernel's smallest case.

Every (kernel, tool) is one cell, `<case>[<target>]:<tool>`, and one process:
`compute-sanitizer --tool <tool> ... python -m harness.sanitize <spec> <case> ...`, whose child
(the `__main__` below) runs the case once, untimed, and prints the case's own outcome as one JSON
line. The tool's summary decides the cell; the case's outcome is only its `case_outcome`, since a
wrong value is no memory error. Runs go a few at a time, each within `sanitize.timeout_s`, and the
report is rewritten after each kernel.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from harness import compute_sanitizer, report
from harness.cells import Cell, Outcome, SkipReason
from harness.compute_sanitizer import SanitizerMissing, Tool
from harness.device import DeviceInfo, NoDevice, probe
from harness.isolation import describe_exit
from harness.kernels import BrokenKernel, Kernel, load_kernel
from harness.matrix import Matrix, Target, load_matrix
from harness.run import (
    RunResult,
    common_properties,
    compile_stage,
    context,
    not_run_cell,
    report_stem,
    why_not_run,
)
from harness.spec import Case, KernelSpec
from harness.toolchain import Toolchain, ToolchainError

ROOT = Path(__file__).resolve().parent.parent  # where the case process imports the harness from
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
    tools = matrix.sanitize.tools
    runner = options.runner or socket.gethostname()
    files = report.report_files(
        options.reports_dir, report_stem("sanitize", target, options.select)
    )
    header = context(target, runner, toolchain, device)
    header["compute_sanitizer"] = str(sanitizer) if isinstance(sanitizer, Path) else None
    common = common_properties(target, toolchain, device)
    stage = compile_stage(
        target=target,
        roots=options.kernels_roots,
        select=options.select,
        toolchain=toolchain,
        cache_dir=options.cache_dir,
        common=common,
        run_names=lambda kernel: [_name(smallest_case(kernel.spec), target, t) for t in tools],
    )
    cells = list(stage.cells)

    def save() -> None:
        report.write(files, f"cuda-matrix-sanitize.{target.name}.{runner}", header, cells)

    save()
    with ThreadPoolExecutor(PARALLEL) as pool:
        # Every run is queued at once, so the pool stays busy across kernels; cells are taken
        # back in kernel order, and each kernel's are on disk before the next is awaited.
        queued: list[tuple[Kernel, Case, tuple | None, list[Future[Cell]]]] = []
        for kernel in stage.kernels:
            case = smallest_case(kernel.spec)
            build = stage.builds.get(kernel.classname)
            skip = why_not_run(target, device, build)
            if skip is None and isinstance(sanitizer, SanitizerMissing):
                skip = Outcome.ERROR, None, str(sanitizer)
            runs = []
            if skip is None:
                for tool in tools:
                    run = _Run(sanitizer, tool, kernel, case, target, build.binary, device, common)
                    runs.append(pool.submit(_sanitize, run, matrix))
            queued.append((kernel, case, skip, runs))
        for kernel, case, skip, runs in queued:
            if skip:
                for tool in tools:
                    name = _name(case, target, tool)
                    cells.append(not_run_cell(kernel.classname, name, skip, common))
            else:
                cells.extend(run.result() for run in runs)
            save()
    return RunResult(cells, files, stage.fresh, stage.cached)


def _name(case: Case, target: Target, tool: Tool) -> str:
    return f"{case.name}[{target.name}]:{tool.value}"


@dataclass(frozen=True)
class _Run:
    sanitizer: Path
    tool: Tool
    kernel: Kernel
    case: Case
    target: Target
    binary: Path
    device: DeviceInfo
    common: dict[str, str]


@dataclass(frozen=True)
class Finished:
    """A process that ended, or was killed at its timeout (status None)."""

    status: int | None
    stdout: str
    stderr: str


@dataclass(frozen=True)
class CaseReport:
    """What the case process says of its own run, as one JSON line on its stdout."""

    outcome: Outcome
    message: str
    skip_reason: SkipReason | None
    properties: dict[str, str]

    @classmethod
    def of(cls, cell: Cell) -> CaseReport:
        return cls(cell.outcome, cell.message, cell.skip_reason, dict(cell.properties))

    def line(self) -> str:
        return json.dumps(
            {
                "outcome": self.outcome.value,
                "message": self.message,
                "skip_reason": self.skip_reason.value if self.skip_reason else None,
                "properties": self.properties,
            }
        )

    @classmethod
    def read(cls, stdout: str) -> CaseReport | None:
        """The report in a case process's stdout; None if it died before printing one."""
        lines = [line for line in stdout.splitlines() if line.startswith("{")]
        try:
            record = json.loads(lines[-1])
            reason = record["skip_reason"]
            return cls(
                Outcome(record["outcome"]),
                record["message"],
                SkipReason(reason) if reason else None,
                dict(record["properties"]),
            )
        except (IndexError, KeyError, TypeError, ValueError):  # a line cut short by a crash
            return None


def _sanitize(run: _Run, matrix: Matrix) -> Cell:
    name = _name(run.case, run.target, run.tool)
    case_process = [
        sys.executable,
        "-m",
        "harness.sanitize",
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
            why = f"could not start {run.sanitizer}: {error}"
            properties = {**run.common, "tool": run.tool.value}
            return Cell(run.kernel.classname, name, Outcome.ERROR, why, properties=properties)
        seconds = time.monotonic() - started
        log = log_file.read_text(errors="replace") if log_file.is_file() else ""
    verdict = judge(run.tool, log, finished, timeout_s)
    return Cell(
        run.kernel.classname,
        name,
        verdict.outcome,
        verdict.message,
        verdict.skip_reason,
        _detail(log, finished),
        seconds,
        {**run.common, **verdict.properties},
    )


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
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:  # it ended in between
            pass
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
    properties: dict[str, str]


def judge(tool: Tool, log: str, finished: Finished, timeout_s: float) -> Verdict:
    """One run's verdict from what it left: the tool's log, the case's report, the exit."""
    found = compute_sanitizer.summary(tool, log)
    case = CaseReport.read(finished.stdout)
    properties = {
        "tool": tool.value,
        "errors": str(found.errors) if found else "unknown",
        "case_outcome": case.outcome.value if case else "none",
        "exit_status": "killed" if finished.status is None else str(finished.status),
    }
    if found and tool is Tool.RACECHECK:
        properties["warnings"] = str(found.warnings)
    if case:
        properties.update(case.properties)  # the seed, and which binary path ran (sass, ptx-jit)
        if case.message:
            properties["case_message"] = case.message

    def failed(message: str) -> Verdict:
        return Verdict(Outcome.FAILED, message, None, properties)

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
        return Verdict(case.outcome, case.message, case.skip_reason, properties)
    if case.outcome is Outcome.ERROR:  # the spec broke: a clean log of half a case proves nothing
        return Verdict(Outcome.ERROR, f"the case broke: {case.message}", None, properties)
    return Verdict(Outcome.PASSED, "", None, properties)


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
    parser = argparse.ArgumentParser(prog="python -m harness.sanitize", description=__doc__)
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
    from harness.gpu import GpuRuntime  # cuda-python, where a device is known to exist

    runtime = GpuRuntime(device, matrix.timing)
    target = matrix.target(args.target)
    cell, _ = runtime.run_case(kernel, case, target, args.binary, {}, timed=False)
    print(CaseReport.of(cell).line(), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(_case_main())
