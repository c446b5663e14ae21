"""The stages a run goes through, as one list, and the pipeline of each command chosen from it:

    load      each spec read in a child process of its own        (pipeline.loading)
    compile   nvcc per build, cached by content                   (pipeline.compiling)
    check     a case this machine does not run, checked on its CPU (pipeline.checking)
    carry     a case whose verdict is as a kept run reached it, passed on (pipeline.carrying)
    run       a case launched, verified and timed on a GPU        (pipeline.running)
    sanitize  a kernel's smallest case under each tool            (pipeline.sanitizing)

`compile` loads and compiles; `check` also checks every case; `test` runs each case this
machine's GPUs can run and checks the others; `sanitize` runs each kernel under the tools. `ab`
(pipeline.comparing) loads and compiles two trees and times their builds against each other.

Each cell a stage settles goes to the run's Results, which holds the report and tells the sinks
(the report's files, the console); a run ends by telling them once more, finished or not.
"""

from __future__ import annotations

import contextlib
import enum
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.compile.toolchain import Toolchain
from harness.model.cell import DeviceRecord, Report
from harness.model.discovery import Kernel
from harness.model.errors import CellError, Skip, Unavailable
from harness.model.matrix import Matrix
from harness.model.outcome import CellKind
from harness.pipeline.carrying import VerdictKeys, carry
from harness.pipeline.cells import PlannedCell, settled_cell
from harness.pipeline.checking import NotRunHere, check_on_cpu
from harness.pipeline.compiling import TargetBuilds, compile_kernels
from harness.pipeline.console import ProgressLines
from harness.pipeline.context import RunContext, RunOptions, open_run, report_stem, sandbox_said
from harness.pipeline.loading import load_kernels, sources_of, this_shard
from harness.pipeline.results import Results, RunResult, Sink
from harness.pipeline.running import (
    GpuJob,
    Workers,
    expected_of_last_run,
    run_on_gpus,
    shared_gpu,
    start_workers,
)
from harness.pipeline.sanitizing import sanitize_kernels, sanitizer_cells
from harness.report import store
from harness.report.history import HistorySink
from harness.run.device import DeviceInfo
from harness.run.schedule import ExpectedTime, expected_time


class Stage(enum.Enum):
    LOAD = "load"
    COMPILE = "compile"
    CHECK = "check"
    RUN = "run"
    SANITIZE = "sanitize"


@dataclass(frozen=True)
class Pipeline:
    """A command's stages, and what its report is: `kind` names its files (`<kind>-<target>`),
    `suite` its suites; `owed` gives the cells a kernel is owed beyond its compile cells (its
    case cells, or its sanitizer cells), which a kernel the target cannot express has skipped."""

    kind: str
    suite: str
    stages: tuple[Stage, ...]
    owed: Callable[[RunContext, Kernel], list[PlannedCell]]


def _case_cells(context: RunContext, kernel: Kernel) -> list[PlannedCell]:
    return [PlannedCell(CellKind.CASE, name) for name in kernel.case_names]


COMPILE = Pipeline("compile", "cuda-matrix", (Stage.LOAD, Stage.COMPILE), _case_cells)
CHECK = Pipeline("check", "cuda-matrix", (Stage.LOAD, Stage.COMPILE, Stage.CHECK), _case_cells)
TEST = Pipeline(
    "junit", "cuda-matrix", (Stage.LOAD, Stage.COMPILE, Stage.CHECK, Stage.RUN), _case_cells
)
SANITIZE = Pipeline(
    "sanitize",
    "cuda-matrix-sanitize",
    (Stage.LOAD, Stage.COMPILE, Stage.SANITIZE),
    sanitizer_cells,
)

CHECK_RUNS_NONE = "check: the cases are checked on the CPU, never run"


def run_target(
    matrix: Matrix,
    options: RunOptions,
    toolchain: Toolchain | Unavailable,
    devices: Sequence[DeviceInfo] | Unavailable,
    workers: Workers | None = None,
) -> RunResult:
    """`test`: every case `devices` can run, run there (spread over them), the others checked
    on the CPU."""
    return run_pipeline(open_run(matrix, options, toolchain, devices), TEST, workers)


def check_target(
    matrix: Matrix, options: RunOptions, toolchain: Toolchain | Unavailable
) -> RunResult:
    """`check`: every case checked on the CPU; no GPU is used, so none is looked for."""
    context = open_run(matrix, options, toolchain, Unavailable(CHECK_RUNS_NONE))
    return run_pipeline(context, CHECK)


def compile_target(
    matrix: Matrix, options: RunOptions, toolchain: Toolchain | Unavailable
) -> RunResult:
    """`compile`: every kernel built and inspected, nothing run."""
    context = open_run(matrix, options, toolchain, Unavailable("compile only"))
    return run_pipeline(context, COMPILE)


def sanitize_target(
    matrix: Matrix,
    options: RunOptions,
    toolchain: Toolchain | Unavailable,
    device: DeviceInfo | Unavailable,
    sanitizer: Path | Unavailable,
) -> RunResult:
    """`sanitize`: each kernel's smallest case under each tool, on `device`."""
    devices = device if isinstance(device, Unavailable) else [device]
    return run_pipeline(open_run(matrix, options, toolchain, devices, sanitizer), SANITIZE)


def run_pipeline(
    context: RunContext, pipeline: Pipeline, workers: Workers | None = None
) -> RunResult:
    """The run of `pipeline` over `context`: its stages in order, its report written from the
    first to the last, finished only where every stage ended."""
    started = time.monotonic()
    options, stages = context.options, pipeline.stages
    stem = report_stem(pipeline.kind, context.target, options.select, options.shard)
    files = store.report_files(options.reports_dir, stem)
    last_run = expected_of_last_run(files.json) if Stage.RUN in stages else {}
    results: Results | None = None
    try:
        with contextlib.ExitStack() as up:
            # Each GPU's first workers start now: their CUDA contexts overlap the load and
            # compile stages, and they take the first kernels to run.
            gpus = start_workers(up, context, workers or Workers()) if Stage.RUN in stages else {}
            sinks: list[Sink] = [store.LiveReport(files), ProgressLines()]
            if options.history is not None and options.commit:
                sinks.append(HistorySink(options.history, options.commit))
            results = Results(_new_report(context, pipeline), sinks)
            print(sandbox_said(context.confinement), flush=True)
            builds = _load_and_compile(context, pipeline, results)
            if Stage.CHECK in stages or Stage.RUN in stages:
                before = len(results.report.cells)  # the case cells come after these
                jobs = _cases(context, pipeline, builds, last_run, results)
                if jobs:
                    run_on_gpus(context, jobs, gpus, results)
                _in_case_order(results.report, builds, before)
            if Stage.SANITIZE in stages:
                sanitize_kernels(context, builds, results)
        report = results.report
        report.shared_gpu = shared_gpu(report.cells)
        report.finished = True
        report.wall_s = round(time.monotonic() - started, 3)
    finally:
        if results is not None:
            results.end()
    return RunResult(report, files, builds.fresh, builds.cached)


def _new_report(context: RunContext, pipeline: Pipeline) -> Report:
    """The run's report, no cell yet: its suite, and where and with what its cells run."""
    device, toolchain, shard = context.device, context.toolchain, context.options.shard
    suite = f"{pipeline.suite}.{context.target.name}.{context.provenance.runner}"
    if shard is not None:
        suite += f".shard{shard.index}of{shard.count}"
    return Report(
        suite=suite,
        target=context.target.name,
        provenance=context.provenance,
        device=None
        if isinstance(device, Unavailable)
        else DeviceRecord(
            name=device.name,
            cc=str(device.cc),
            driver=device.driver,
            cuda_driver=device.cuda_driver,
            sm_count=device.sm_count,
            l2_bytes=device.l2_bytes,
            uuid=device.uuid,
        ),
        no_device_why=device.why if isinstance(device, Unavailable) else None,
        nvcc=str(toolchain.nvcc) if isinstance(toolchain, Toolchain) else None,
        compute_sanitizer=str(context.sanitizer) if isinstance(context.sanitizer, Path) else None,
    )


def _load_and_compile(context: RunContext, pipeline: Pipeline, results: Results) -> TargetBuilds:
    """The load and compile stages: the specs read (this shard's kept), the kernels compiled,
    and their cells added."""
    loaded = this_shard(context, load_kernels(context, context.folders))
    builds = compile_kernels(context, loaded.kernels, lambda k: pipeline.owed(context, k))
    report = results.report
    report.shard = loaded.shard
    report.sources = sources_of(context, loaded)
    results.add([*loaded.cells, *builds.cells])
    return builds


def _cases(
    context: RunContext,
    pipeline: Pipeline,
    builds: TargetBuilds,
    last_run: dict[tuple[str, str], ExpectedTime],
    results: Results,
) -> list[GpuJob]:
    """Each case of each compiled kernel, where it goes: a case whose build failed fails here;
    one this machine cannot run is checked on its CPU; one whose verdict the history passes on
    is carried (harness.pipeline.carrying); the rest are the GPUs' jobs."""
    jobs: list[GpuJob] = []
    failed = []
    not_run: list[NotRunHere] = []
    keys = VerdictKeys(context)
    for kernel in builds.kernels:
        cannot_run: list[str] = []
        skip: Skip | None = None
        for case in kernel.declared.cases:
            try:
                binary = context.runnable_binary(builds.build_of(kernel, case), case.defines)
            except Skip as cannot:
                skip = cannot
                cannot_run.append(case.name)
                continue
            except CellError as cannot:  # its build failed: it fails, on any machine
                planned = PlannedCell(CellKind.CASE, case.name)
                failed.append(
                    settled_cell(kernel, planned, context.target, context.provenance, cannot)
                )
                continue
            key = (kernel.classname, case.name)
            expected = expected_time(key, last_run, case.work)
            verdict = keys.of(kernel, case.name, builds.build_of(kernel, case))
            jobs.append(GpuJob(kernel, case, binary, expected, verdict))
        if skip is not None:
            not_run.append(NotRunHere(kernel, skip, cannot_run))
    # check's context has no device, so every case it has is one this machine does not run
    assert Stage.RUN in pipeline.stages or not jobs
    results.add([*failed, *check_on_cpu(context, not_run, builds)])
    return carry(context, jobs, results)


def _in_case_order(report: Report, builds: TargetBuilds, first: int) -> None:
    """The case cells (from `first` on), which came in as they finished, put in the order of
    the kernels' cases."""
    order = {
        (kernel.classname, case.name): index
        for index, (kernel, case) in enumerate(
            (k, c) for k in builds.kernels for c in k.declared.cases
        )
    }
    report.cells[first:] = sorted(report.cells[first:], key=lambda c: order[c.classname, c.case])
