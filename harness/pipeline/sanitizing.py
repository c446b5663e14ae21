"""One target's kernels under compute-sanitizer: each tool over each kernel's smallest case.

Every (kernel, tool) is one cell, `<case>[<target>]:<tool>`, and one process:
`compute-sanitizer --tool <tool> ... python -m harness.run.sanitized_case <spec> <case> ...`,
which runs the case once, untimed, each buffer an allocation of exactly its size (no guard
zones, which would put a stray access in bounds), and prints the case's own cell as one JSON
line (the result model's form). The tool's log decides the cell
(harness.run.sanitizer.diagnose); the case's outcome is only its `case_outcome`, since a wrong
value is no memory error, and a run the tool could not finish is an error naming the tool.
Runs go a few at a time, each within `sanitize.timeout_s`, and the report is rewritten after
each kernel.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from harness import processes
from harness.compile.toolchain import Toolchain
from harness.model.cell import Cell, Provenance
from harness.model.declared import Declared, DeclaredCase
from harness.model.discovery import Kernel
from harness.model.errors import Broken, CellError, Unavailable
from harness.model.matrix import Matrix, Target, Tool
from harness.model.outcome import CellKind
from harness.pipeline.start import (
    PlannedCell,
    RunOptions,
    RunResult,
    new_cell,
    report_stem,
    runnable_binary,
    settled_cell,
    start_run,
)
from harness.report import store
from harness.run import sanitizer as compute_sanitizer
from harness.run.device import DeviceInfo
from harness.sandbox import Confinement

# where the case process imports the harness from: the folder that holds this package
HARNESS_PARENT = Path(__file__).resolve().parents[2]
# Runs at once: each is a Python process plus the tool's instrumentation, mostly host work, with
# a CUDA context of its own on the one GPU. Half the cores, at most 8 contexts.
PARALLEL = max(1, min(8, (os.cpu_count() or 2) // 2))


def smallest_case(declared: Declared) -> DeclaredCase:
    """The case with the least work (bytes + flops); ties keep the spec's order.

    A case whose work() needs what setup() derives on the device cannot be weighed here, and
    ranks after every case that can.
    """

    def weight(case: DeclaredCase) -> tuple[int, float]:
        if case.work is None:  # a param only setup() knows: unknown, not an error here
            return 1, 0
        return 0, case.work.bytes + case.work.flops

    return min(declared.cases, key=weight)


def sanitize_target(
    matrix: Matrix,
    options: RunOptions,
    toolchain: Toolchain | Unavailable,
    device: DeviceInfo | Unavailable,
    sanitizer: Path | Unavailable,
) -> RunResult:
    target = options.target
    tools = matrix.sanitize.tools

    def run_cells(kernel: Kernel) -> list[PlannedCell]:
        case = smallest_case(kernel.declared).name
        return [PlannedCell(CellKind.SANITIZER, case, tool.value) for tool in tools]

    files = store.report_files(options.reports_dir, report_stem("sanitize", target, options.select))
    tool_path = sanitizer if isinstance(sanitizer, Path) else None
    started = start_run(
        matrix, options, files, "cuda-matrix-sanitize", toolchain, device, run_cells, tool_path
    )
    report, where, stage = started.report, started.where, started.stage
    confinement = started.confinement
    with ThreadPoolExecutor(PARALLEL) as pool:
        # Every run is queued at once, so the pool stays busy across kernels; cells are taken
        # back in kernel order, and each kernel's are on disk before the next is awaited.
        queued: list[list[Future[Cell]] | list[Cell]] = []
        for kernel in stage.kernels:
            try:
                case = smallest_case(kernel.declared)
                build = stage.build_of(kernel, case)
                binary = runnable_binary(target, device, build, case.defines)
                if isinstance(sanitizer, Unavailable):
                    raise Broken(sanitizer.why)
            except CellError as cannot:
                queued.append(
                    [settled_cell(kernel, run, target, where, cannot) for run in run_cells(kernel)]
                )
                continue
            assert isinstance(device, DeviceInfo)  # runnable_binary raised otherwise
            runs = [
                _Run(sanitizer, tool, kernel, case.name, target, binary, device, where, confinement)
                for tool in tools
            ]
            queued.append([pool.submit(_sanitize, run, matrix) for run in runs])
        for cells in queued:
            report.cells.extend(c if isinstance(c, Cell) else c.result() for c in cells)
            store.write(files, report)
    report.finished = True
    store.write(files, report)
    return RunResult(report, files, stage.fresh, stage.cached)


@dataclass(frozen=True)
class _Run:
    sanitizer: Path
    tool: Tool
    kernel: Kernel
    case: str  # the case's name
    target: Target
    binary: Path
    device: DeviceInfo
    provenance: Provenance
    confinement: Confinement | None  # what the case process may touch once it imports the spec


def _sanitize(run: _Run, matrix: Matrix) -> Cell:
    cell_of = PlannedCell(CellKind.SANITIZER, run.case, run.tool.value)
    cell = new_cell(run.kernel, cell_of, run.target, run.provenance)
    case_process = [
        sys.executable,
        "-m",
        "harness.run.sanitized_case",
        str(run.kernel.spec_file),
        run.case,
        run.target.name,
        str(run.binary),
        "--matrix",
        str(matrix.path.resolve()),
        "--device",
        str(run.device.ordinal),
        *(["--confine", run.confinement.to_json()] if run.confinement else []),
    ]
    path = os.pathsep.join(filter(None, [str(HARNESS_PARENT), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path}
    timeout_s = matrix.sanitize.timeout_s
    with tempfile.TemporaryDirectory(prefix="sanitize-") as scratch:
        log_file = Path(scratch) / "compute-sanitizer.log"
        argv = compute_sanitizer.command(run.sanitizer, run.tool, log_file, case_process)
        started = time.monotonic()
        try:
            # A session of its own, so that a timeout takes the tool, the case process and
            # whatever helper the tool started, all at once.
            finished = processes.finish(processes.start(argv, env=env), timeout_s)
        except OSError as error:  # not an executable after all, or no room for a process
            cell.settle(Broken(f"could not start {run.sanitizer}: {error}"))
            return cell
        cell.seconds = time.monotonic() - started
        log = log_file.read_text(errors="replace") if log_file.is_file() else ""
    case = compute_sanitizer.read_case_cell(finished.stdout, run.target.name, run.provenance)
    diagnosis = compute_sanitizer.diagnose(run.tool, log, finished, timeout_s, case)
    cell.outcome, cell.message, cell.skip_reason = (
        diagnosis.outcome,
        diagnosis.message,
        diagnosis.skip_reason,
    )
    cell.sanitizer = diagnosis.findings
    cell.detail = compute_sanitizer.detail(log, finished)
    if case:  # the seed, and how the device loaded the binary (sass, ptx-jit)
        cell.seed, cell.loaded_as = case.seed, case.loaded_as
    return cell
