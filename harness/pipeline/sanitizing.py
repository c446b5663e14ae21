"""The sanitize stage: a target's kernels under compute-sanitizer, each tool over each
kernel's smallest case.

Every (kernel, tool) is one cell, `<case>[<target>]:<tool>`, and one process:
`compute-sanitizer --tool <tool> ... python -m harness.run.sanitized_case <spec> <case> ...`,
which runs the case once, untimed, each buffer an allocation of exactly its size (no guard
zones, which would put a stray access in bounds), and prints the case's own cell as one JSON
line (the result model's form). The tool's log decides the cell
(harness.run.sanitizer.diagnose); the case's outcome is only its `case_outcome`, since a wrong
value is no memory error, and a run the tool could not finish is an error naming the tool.
Runs go a few at a time, each within `sanitize.timeout_s`, and each kernel's cells are added
to the run's results (and so to its report) before the next kernel's.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from harness import processes, waiting
from harness.model.cell import Cell
from harness.model.declared import Declared, DeclaredCase
from harness.model.discovery import Kernel
from harness.model.errors import Broken, CellError, Unavailable
from harness.model.matrix import Tool
from harness.model.outcome import CellKind
from harness.pipeline.cells import PlannedCell, new_cell, settled_cell
from harness.pipeline.compiling import TargetBuilds
from harness.pipeline.context import RunContext
from harness.pipeline.results import Results
from harness.run import sanitizer as compute_sanitizer
from harness.run.device import DeviceInfo

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


def sanitizer_cells(context: RunContext, kernel: Kernel) -> list[PlannedCell]:
    """A kernel's cells under the sanitizer: one per tool, over its smallest case."""
    case = smallest_case(kernel.declared).name
    tools = context.matrix.sanitize.tools
    return [PlannedCell(CellKind.SANITIZER, case, tool.value) for tool in tools]


def sanitize_kernels(context: RunContext, builds: TargetBuilds, results: Results) -> None:
    """Each kernel's smallest case under each tool, a few runs at a time; each kernel's cells
    go to `results` in kernel order."""
    sanitizer, device = context.sanitizer, context.device
    with ThreadPoolExecutor(PARALLEL) as pool:
        # Every run is queued at once, so the pool stays busy across kernels; cells are taken
        # back in kernel order, and each kernel's are added before the next is awaited.
        queued: list[list[Future[Cell]] | list[Cell]] = []
        for kernel in builds.kernels:
            try:
                case = smallest_case(kernel.declared)
                binary = context.runnable_binary(builds.build_of(kernel, case), case.defines)
                if isinstance(sanitizer, Unavailable):
                    raise Broken(sanitizer.why)
            except CellError as cannot:
                queued.append(
                    [
                        settled_cell(kernel, planned, context.target, context.provenance, cannot)
                        for planned in sanitizer_cells(context, kernel)
                    ]
                )
                continue
            assert isinstance(device, DeviceInfo)  # runnable_binary raised otherwise
            runs = [
                _Run(sanitizer, tool, kernel, case.name, binary, device)
                for tool in context.matrix.sanitize.tools
            ]
            queued.append([pool.submit(_sanitize, context, run) for run in runs])
        for cells in queued:
            results.add([c if isinstance(c, Cell) else waiting.result(c) for c in cells])


@dataclass(frozen=True)
class _Run:
    sanitizer: Path
    tool: Tool
    kernel: Kernel
    case: str  # the case's name
    binary: Path
    device: DeviceInfo


def _sanitize(context: RunContext, run: _Run) -> Cell:
    planned = PlannedCell(CellKind.SANITIZER, run.case, run.tool.value)
    target, provenance, confinement = context.target, context.provenance, context.confinement
    cell = new_cell(run.kernel, planned, target, provenance)
    case_process = [
        sys.executable,
        "-m",
        "harness.run.sanitized_case",
        str(run.kernel.spec_file),
        run.case,
        target.name,
        str(run.binary),
        "--matrix",
        str(context.matrix.path.resolve()),
        "--device",
        str(run.device.ordinal),
        *(["--confine", confinement.to_json()] if confinement else []),
    ]
    path = os.pathsep.join(filter(None, [str(HARNESS_PARENT), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path}
    timeout_s = context.matrix.sanitize.timeout_s
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
    case = compute_sanitizer.read_case_cell(finished.stdout, target.name, provenance)
    diagnosis = compute_sanitizer.diagnose(run.tool, log, finished, timeout_s, case)
    if diagnosis.error is not None:
        cell.settle(diagnosis.error)
    cell.sanitizer = diagnosis.findings
    cell.detail = compute_sanitizer.detail(log, finished)
    if case:  # the seed, and how the device loaded the binary (sass, ptx-jit)
        cell.seed, cell.loaded_as = case.seed, case.loaded_as
    return cell
