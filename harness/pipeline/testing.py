"""One target of the matrix, end to end: discover, compile, run, verify, time, report.

Every (kernel, case) gets exactly one cell. The report is rewritten after the compile stage and
as cases finish (store.LiveReport: at most WRITE_INTERVAL_S behind the last), so whatever was
measured is on disk whatever happens next. With several GPUs visible, each has its own shard of
the cases (balanced by expected time); a fault on one GPU fails only its case and restarts only
that worker. Each kernel's cases run in a worker process of the kernel's own (harness.run.worker),
so a spec can reach no other kernel's cells; the next kernel's worker starts, and starts its host
work, while this one's cases run. Each GPU takes its kernels, and each kernel its cases, in the
order that overlaps host work best with the GPU's (schedule.grouped_pipeline_order).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.compile.nvcc import Compiled
from harness.compile.toolchain import Toolchain
from harness.model.cell import Cell, Provenance, Report
from harness.model.codec import cell_from_json, report_from_json
from harness.model.declared import DeclaredCase
from harness.model.discovery import Kernel
from harness.model.errors import CellError, ReportError, Skip, SpecError, Unavailable
from harness.model.matrix import Matrix, Target
from harness.model.outcome import CellKind
from harness.pipeline.console import Progress
from harness.pipeline.start import (
    CompileStage,
    PlannedCell,
    RunOptions,
    RunResult,
    StartedRun,
    check_selection,
    report_stem,
    runnable_binary,
    settled_cell,
    spec_confinement,
    start_run,
)
from harness.report import store
from harness.run import worker
from harness.run.device import DeviceInfo
from harness.run.pool import Serve, WorkerFault, WorkerPool
from harness.run.schedule import (
    AHEAD_CASES,
    Expected,
    ahead_memory,
    balanced_parts,
    expected,
    grouped_pipeline_order,
)
from harness.run.spec_check import check_kernels
from harness.run.worker import CaseJob, Prepare, WorkerSetup
from harness.sandbox import Confinement


@dataclass(frozen=True)
class Workers:
    """How a GPU worker process is started and served: worker.start and worker.serve, or fakes."""

    start: Callable[[WorkerSetup], object] = worker.start
    serve: Serve = worker.serve


@dataclass(frozen=True)
class _Job:
    """A run cell that goes to a GPU."""

    kernel: Kernel
    case: DeclaredCase
    binary: Path
    expected: Expected


def run_target(
    matrix: Matrix,
    options: RunOptions,
    toolchain: Toolchain | Unavailable,
    devices: Sequence[DeviceInfo] | Unavailable,
    workers: Workers = Workers(),
    execute: bool = True,
    kind: str = "",
) -> RunResult:
    """`devices`: every GPU to spread the cases over, or why there is none; `execute` False
    compiles only (the compile command); `kind` names the report (`<kind>-<target>.xml`),
    by default `junit`, or `compile` for a compile only."""
    started = time.monotonic()
    first = devices if isinstance(devices, Unavailable) else devices[0]
    target = options.target
    kind = kind or ("junit" if execute else "compile")
    stem = report_stem(kind, target, options.select, options.shard)
    files = store.report_files(options.reports_dir, stem)
    last_run = _expected_of_last_run(files.json)  # before this run replaces it
    with contextlib.ExitStack() as up:
        # Each GPU's first worker starts now: its imports and CUDA context overlap the compile
        # stage, and it takes the first kernel to run. A usage error comes first, though: the
        # confinement makes the cache and reports folders, and a bad command makes nothing.
        check_selection(options.kernels_roots, options.select)
        confinement = spec_confinement(options)
        gpus = _started_workers(up, devices, matrix, workers, confinement) if execute else {}
        started_run = start_run(
            matrix, options, files, "cuda-matrix", toolchain, first, _case_cells
        )
        if execute:
            _run_cases(started_run, last_run, devices, gpus, matrix, target, files)
    report = started_run.report
    report.shared_gpu = _shared_gpu(report.cells)
    report.finished = True
    report.wall_s = round(time.monotonic() - started, 3)
    store.write(files, report)
    return RunResult(report, files, started_run.stage.fresh, started_run.stage.cached)


@dataclass(frozen=True)
class _Gpu:
    """A GPU's workers: how one is set up, and the first one, started before the kernels are
    known."""

    setup: WorkerSetup
    workers: Workers
    first: WorkerPool

    def pool(self, kernel: Kernel) -> WorkerPool:
        """A worker for `kernel` (not started yet), which imports what its vendor needs."""
        setup = dataclasses.replace(self.setup, preload=kernel.declared.preload)
        return WorkerPool(self.workers.start, self.workers.serve, setup)


# Workers of one GPU holding cases prepared ahead at once: the one running, and the next three.
# A worker's start (its imports and CUDA context, ~1.2 s on an H200 machine) and its first
# cases' host work (up to ~1 s) outlast most kernels' turns there (0.4-1.4 s).
WORKERS_AHEAD = 4


def _started_workers(
    up: contextlib.ExitStack,
    devices: Sequence[DeviceInfo] | Unavailable,
    matrix: Matrix,
    workers: Workers,
    confinement: Confinement | None,
) -> dict[int, _Gpu]:
    """Each GPU, by ordinal, with its first worker starting; what `up` closes."""
    if isinstance(devices, Unavailable):
        return {}
    host_threads = max(1, (os.cpu_count() or 1) // len(devices))
    ahead_bytes = ahead_memory() // (WORKERS_AHEAD * len(devices))
    locks = Path(up.enter_context(tempfile.TemporaryDirectory(prefix="cuda-matrix-")))
    gpus = {}
    for device in devices:
        quiet = locks / f"gpu{device.ordinal}.lock"
        setup = WorkerSetup(
            device, matrix.timer, host_threads, quiet, ahead_bytes, confinement=confinement
        )
        first = up.enter_context(WorkerPool(workers.start, workers.serve, setup))
        first.start()
        gpus[device.ordinal] = _Gpu(setup, workers, first)
    return gpus


def _run_cases(
    started_run: StartedRun,
    last_run: dict[tuple[str, str], Expected],
    devices: Sequence[DeviceInfo] | Unavailable,
    gpus: dict[int, _Gpu],
    matrix: Matrix,
    target: Target,
    files: store.ReportFiles,
) -> None:
    """A cell for every case of every compiled kernel, run on `devices` (or settled with why it
    cannot run), appended to the report in the order of the kernels' cases."""
    report, where, stage = started_run.report, started_run.where, started_run.stage
    first = devices if isinstance(devices, Unavailable) else devices[0]
    compiled = len(report.cells)  # the run cells follow the compile cells
    order = {
        (kernel.classname, case.name): index
        for index, (kernel, case) in enumerate(
            (k, c) for k in stage.kernels for c in k.declared.cases
        )
    }
    jobs = []
    unrunnable: list[tuple[Kernel, Skip, list[str]]] = []
    for kernel in stage.kernels:
        cannot_run: list[str] = []  # cases this machine cannot run: checked on its CPU
        skip = None
        for case in kernel.declared.cases:
            try:
                build = stage.build_of(kernel, case)
                binary = runnable_binary(target, first, build, case.defines)
            except Skip as cannot:
                skip = cannot
                cannot_run.append(case.name)
                continue
            except CellError as cannot:  # its build failed: it fails, on any machine
                run = PlannedCell(CellKind.CASE, case.name)
                report.cells.append(settled_cell(kernel, run, target, where, cannot))
                continue
            key = (kernel.classname, case.name)
            jobs.append(_Job(kernel, case, binary, expected(key, last_run, case.work)))
        if skip is not None:
            unrunnable.append((kernel, skip, cannot_run))
    checked = _checked_here(unrunnable, stage, matrix, target, where, started_run.confinement)
    report.cells += checked
    store.write(files, report)
    if jobs and not isinstance(devices, Unavailable):
        _run_jobs(jobs, list(devices), gpus, matrix, target, where, report, files)
    run_cells = sorted(report.cells[compiled:], key=lambda c: order[c.classname, c.case])
    report.cells[compiled:] = run_cells


def _shared_gpu(cells: list[Cell]) -> str | None:
    """What the report says of a GPU that another process used during the run: how many timed
    cells saw it, and the first one's why."""
    timed = [cell for cell in cells if cell.timing]
    shared = [cell for cell in timed if cell.timing and cell.timing.shared_gpu]
    if not shared:
        return None
    first = shared[0]
    why = first.timing.shared_gpu if first.timing else ""
    return (
        f"{len(shared)} of {len(timed)} timed cells ran while another process used the GPU "
        f"(the first, {first.classname} {first.name}: {why})"
    )


def _checked_here(
    unrunnable: list[tuple[Kernel, Skip, list[str]]],
    stage: CompileStage,
    matrix: Matrix,
    target: Target,
    where: Provenance,
    confinement: Confinement | None,
) -> list[Cell]:
    """The case cells of kernels that cannot run here (no GPU, or not this one), each checked
    on this machine's CPU (harness.run.spec_check): an error where its spec would break it on
    a GPU, else skipped with why it did not run."""
    findings = check_kernels(
        [kernel for kernel, _, _ in unrunnable],
        {
            key: build.resources if isinstance(build, Compiled) else None
            for key, build in stage.builds.items()
        },
        target,
        matrix.timer.case_timeout_s,
        confinement,
    )
    cells = []
    for kernel, cannot, names in unrunnable:
        for name in names:
            found = findings[kernel.classname][name]
            settled = SpecError(found) if found else cannot.adding(CHECKED)
            run = PlannedCell(CellKind.CASE, name)
            cells.append(settled_cell(kernel, run, target, where, settled))
    return cells


CHECKED = "its spec was checked here (setup, launches, entries, arguments, reference, work)"


def _case_cells(kernel: Kernel) -> list[PlannedCell]:
    return [PlannedCell(CellKind.CASE, name) for name in kernel.case_names]


def _run_jobs(
    jobs: list[_Job],
    devices: list[DeviceInfo],
    gpus: dict[int, _Gpu],
    matrix: Matrix,
    target: Target,
    where: Provenance,
    report: Report,
    files: store.ReportFiles,
) -> None:
    """Every job on one of `devices`, each device working through its shard kernel by kernel,
    each kernel in a worker of its own (`gpus`, by device ordinal); each cell goes into the
    report (rewritten on disk) the moment it is done."""
    balanced = balanced_parts(jobs, lambda job: job.expected.turn_s, len(devices))
    shards = [
        grouped_pipeline_order(queue, lambda job: job.kernel.classname, lambda job: job.expected)
        for queue in balanced
    ]
    longest = max(sum(j.expected.turn_s for group in s for j in group) for s in shards)
    progress = Progress(len(jobs), longest)
    live = store.LiveReport(files, report)
    done = threading.Lock()
    timeout_s = matrix.timer.case_timeout_s

    def finished(cell: Cell) -> None:
        with done:
            live.add(cell)
            progress.finished(cell)

    def drive(device: DeviceInfo, groups: list[list[_Job]]) -> None:
        gpu = gpus[device.ordinal]
        with contextlib.ExitStack() as up:
            pools = [gpu.first]
            pools += [up.enter_context(gpu.pool(group[0].kernel)) for group in groups[1:]]
            for group, pool in zip(groups, pools, strict=True):
                if group[0].kernel.declared.preload:  # an import of seconds (torch): from now
                    pool.start()
            prepared = 0  # the kernels whose workers were told their first cases
            for index, group in enumerate(groups):
                # this kernel's worker, and the next ones': up, and preparing their first cases
                for ahead in range(prepared, min(index + WORKERS_AHEAD, len(groups))):
                    pools[ahead].post(_prepare(groups[ahead], target, where))
                    prepared = ahead + 1
                for at, job in enumerate(group):
                    after = group[at + 1 : at + 1 + AHEAD_CASES]
                    upcoming = tuple(_case_job(later, target, where) for later in after)
                    case_job = _case_job(job, target, where, upcoming)
                    finished(_run_one(pools[index], job, case_job, device, timeout_s))
                pools[index].close()

    failures: list[BaseException] = []

    def guarded(device: DeviceInfo, groups: list[list[_Job]]) -> None:
        try:
            drive(device, groups)
        except BaseException as error:  # a harness bug: raised again in the caller's thread
            failures.append(error)

    try:
        if len(devices) == 1:
            drive(devices[0], shards[0])
        else:
            threads = [
                threading.Thread(target=guarded, args=(d, q), daemon=True)
                for d, q in zip(devices, shards, strict=True)
                if q
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
    finally:
        progress.close()
        live.close()
    if failures:
        raise failures[0]


def _prepare(group: list[_Job], target: Target, where: Provenance) -> Prepare:
    """What starts the host work of a kernel's first cases in its worker."""
    return Prepare(tuple(_case_job(job, target, where) for job in group[:AHEAD_CASES]))


def _run_one(
    pool: WorkerPool, job: _Job, case_job: CaseJob, device: DeviceInfo, timeout_s: float
) -> Cell:
    started = time.monotonic()
    try:
        cell = _cell_of(pool.run(case_job, timeout_s), job, case_job)
    except WorkerFault as fault:  # the worker died on this case, or answered nonsense
        run = PlannedCell(CellKind.CASE, job.case.name)
        cell = settled_cell(job.kernel, run, case_job.target, case_job.provenance, fault)
    # a faulted case costs what the parent waited, worker start included
    cell.seconds = cell.seconds or time.monotonic() - started
    if pool.start_s:  # the first case, or the one after a fault
        cell.worker_start_s = pool.start_s
    cell.gpu = device.ordinal
    return cell


def _cell_of(record: object, job: _Job, case_job: CaseJob) -> Cell:
    """The cell a worker sent for `job`, read back and checked to be that job's: a worker runs a
    spec, and may say anything; WorkerFault where it is not that job's cell."""
    try:
        if not isinstance(record, dict):
            raise TypeError(f"{type(record).__name__}, not an object")
        cell = cell_from_json(record, case_job.target.name, case_job.provenance)
    except (KeyError, TypeError, ValueError) as error:
        raise WorkerFault(f"the worker's cell is not readable: {error}") from None
    answered = (cell.kind, cell.chapter, cell.kernel, cell.case)
    asked = (CellKind.CASE, job.kernel.chapter, job.kernel.name, job.case.name)
    if answered != asked:
        raise WorkerFault(f"the worker answered for another cell: {answered[1:]}, not {asked[1:]}")
    return cell


def _case_job(
    job: _Job, target: Target, where: Provenance, upcoming: tuple[CaseJob, ...] = ()
) -> CaseJob:
    return CaseJob(
        job.kernel.folder / "spec.py", job.case.name, target, job.binary, where, upcoming
    )


def _expected_of_last_run(json_file: Path) -> dict[tuple[str, str], Expected]:
    """What each run cell took in the report this run replaces, its host work apart from its
    turn on the GPU; empty when there is none."""
    try:
        last = report_from_json(json.loads(json_file.read_text()), json_file)
    except (OSError, ValueError, ReportError):  # none yet, unreadable, or of another schema
        return {}
    return {
        (c.classname, c.case): Expected(
            c.stages.setup_s + c.stages.reference_s if c.stages else 0.0, c.seconds
        )
        for c in last.cells
        if c.kind is CellKind.CASE
    }
