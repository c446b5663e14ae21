"""One target of the matrix, end to end: discover, compile, run, verify, time, report.

Every (kernel, case) gets exactly one cell. The report is rewritten after the compile stage and
after each case, so whatever was measured is on disk before the next case starts.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from harness.build.matrix import Matrix, Target
from harness.build.toolchain import Toolchain, ToolchainError
from harness.commands.stage import (
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
from harness.provenance import runner_name
from harness.report import junit
from harness.result import Cell, Outcome
from harness.run import worker
from harness.run.device import DeviceInfo, NoDevice
from harness.run.pool import Fault, WorkerPool
from harness.run.worker import CaseJob, WorkerSetup


@dataclass(frozen=True)
class RunOptions:
    target: Target
    kernels_roots: tuple[Path, ...]  # each holds <chapter>/<kernel>/spec.py folders
    reports_dir: Path
    cache_dir: Path
    execute: bool  # False: compile cells only
    select: str = ""  # keep kernels whose <chapter>.<kernel> contains this
    runner: str = ""  # names the report's suite; defaults to the host name
    commit: str | None = None  # the project's commit the run is of


def run_target(
    matrix: Matrix,
    options: RunOptions,
    toolchain: Toolchain | ToolchainError,
    device: DeviceInfo | NoDevice,
) -> RunResult:
    target = options.target
    # Before any report is written: a run that selects nothing writes none.
    kernels = find_kernels(options.kernels_roots, options.select, matrix.timing.case_timeout_s)
    runner = runner_name(options.runner)
    kind = "junit" if options.execute else "compile"
    files = junit.report_files(options.reports_dir, report_stem(kind, target, options.select))
    where = provenance(runner, options.commit, toolchain, device)
    report = new_report(f"cuda-matrix.{target.name}.{runner}", target, where, toolchain, device)
    junit.write(files, report)  # unfinished and empty: a run killed now leaves no stale report
    stage = compile_stage(
        target=target,
        kernels=kernels,
        toolchain=toolchain,
        cache_dir=options.cache_dir,
        where=where,
        run_cells=lambda kernel: [RunCell(case.name) for case in kernel.spec.cases],
    )
    report.cells.extend(stage.cells)
    junit.write(files, report)
    if options.execute:
        with WorkerPool(worker.start, worker.serve, WorkerSetup(device, matrix.timing)) as pool:
            for kernel in stage.kernels:
                build = stage.builds.get(kernel.classname)
                not_run = why_not_run(target, device, build)
                for case in kernel.spec.cases:
                    if not_run:
                        cell = not_run_cell(kernel, RunCell(case.name), target, where, not_run)
                    else:
                        job = CaseJob(
                            kernel.folder / "spec.py", case.name, target, build.binary, where
                        )
                        started = time.monotonic()
                        result = pool.run(job, matrix.timing.case_timeout_s)
                        if isinstance(result, Fault):  # the worker died on this case
                            cell = Cell(
                                kernel.chapter,
                                kernel.name,
                                case.name,
                                target.name,
                                where,
                                Outcome.FAILED,
                                message=result.message,
                            )
                        else:
                            cell = result
                        # a faulted case costs what the parent waited, worker start included
                        cell.seconds = cell.seconds or time.monotonic() - started
                        if pool.start_s:  # the first case, or the one after a fault
                            cell.worker_start_s = pool.start_s
                    report.cells.append(cell)
                    junit.write(files, report)
    report.finished = True
    junit.write(files, report)
    return RunResult(report, files, stage.fresh, stage.cached)
